# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster_hosts lookup (the aorta_cluster_file route) gives what the inventory plugin gives."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleLookupError
from ansible.plugins.loader import lookup_loader

CLUSTER = {
    "username": "{user-id}",
    "priv_key_file": "/keys/id.pem",
    "env_vars": {"NCCL_DEBUG": "INFO"},
    "racks": {"switch_ssh_password": "do-not-leak"},
    "node_dict": {
        "mgmt-b": {"vpc_ip": "10.0.0.2", "rack_id": "r1", "gpu_sku": "MI300X"},
        "mgmt-a": {"vpc_ip": "10.0.0.1"},
        "mgmt-c": {"vpc_ip": "10.0.0.3"},
    },
}


def query(path, **kwargs):
    return lookup_loader.get("aorta.cluster.cluster_hosts").run([str(path)], variables={}, **kwargs)


def test_records_in_rank_order_with_groups_and_vars(tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "alice")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    records = query(path)
    assert [r["name"] for r in records] == ["mgmt-b", "mgmt-a", "mgmt-c"]
    assert [r["groups"] for r in records] == [
        ["aorta_nodes", "aorta_head"],
        ["aorta_nodes", "aorta_workers"],
        ["aorta_nodes", "aorta_workers"],
    ]
    head = records[0]["vars"]
    assert head["aorta_node_rank"] == 0 and head["aorta_vpc_ip"] == "10.0.0.2"
    assert head["ansible_user"] == "alice" and head["ansible_ssh_private_key_file"] == "/keys/id.pem"
    assert head["aorta_cluster_env"] == {"NCCL_DEBUG": "INFO"}
    assert head["aorta_cluster_file"] == str(path)
    assert records[0]["extra"] == {"gpu_sku": "MI300X"}
    assert records[2]["vars"]["aorta_vpc_ip"] == "10.0.0.3"
    assert "do-not-leak" not in json.dumps(records)


def test_machine_credential_mode_drops_connection_vars(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(CLUSTER))
    records = query(path, connection_vars=False)
    assert not any(key.startswith("ansible_") and key != "ansible_host" for r in records for key in r["vars"])


def test_relative_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "prod.json").write_text(json.dumps(CLUSTER))
    monkeypatch.chdir(tmp_path)
    assert len(query("clusters/prod.json")) == 3


def test_bad_file_is_one_line_naming_file_and_key(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({**CLUSTER, "node_dict": {"a": {"vpc_ip": "<changeme>"}}}))
    with pytest.raises(AnsibleLookupError) as info:
        query(path)
    message = str(info.value.message)
    assert message.startswith(f"{path}: node_dict.a.vpc_ip:") and "\n" not in message
