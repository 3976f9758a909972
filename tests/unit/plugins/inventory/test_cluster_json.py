# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory plugin against real files, through Ansible's own InventoryData and DataLoader."""

from __future__ import annotations

import json

import pytest
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader
from ansible.template import Templar, trust_as_template


def InventoryModule():
    """The plugin as Ansible loads it: the loader attaches its documented options."""
    return inventory_loader.get("aorta.cluster.cluster_json")


CLUSTER = {
    "username": "{user-id}",
    "priv_key_file": "/keys/{user-id}.pem",
    "env_vars": {"NCCL_DEBUG": "INFO"},
    "orchestrator": "container",
    "container": {"image": "rocm/aorta:1", "runtime": {"args": {"network": "host"}}},
    "racks": {"switch_ssh_password": "do-not-leak", "r1": {"platform": "x"}},
    "node_dict": {
        "mgmt-b": {"vpc_ip": "10.0.0.2", "bmc_ip": "NA", "rack_id": "r1", "gpu_sku": "MI300X"},
        "mgmt-a": {"vpc_ip": "10.0.0.1", "rack_id": "r2"},
        "mgmt-c": {"vpc_ip": "10.0.0.3"},
    },
}


class Warnings(list):
    """Stands in for the plugin's Display: keeps what it warns."""

    def warning(self, msg, *args, **kwargs):
        self.append(msg)


def run_plugin(path, monkeypatch, user="alice", warnings=None):
    monkeypatch.setenv("USER", user)
    loader = DataLoader()
    inventory = InventoryData()
    plugin = InventoryModule()
    plugin.templar = Templar(loader=loader)
    plugin.display = Warnings() if warnings is None else warnings
    assert plugin.verify_file(str(path))
    plugin.parse(inventory, loader, str(path), cache=False)
    return inventory


def write(tmp_path, data, name="cluster.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def hostvars(inventory, host):
    return inventory.get_host(host).get_vars()


def test_hosts_groups_and_vars_follow_node_dict_order(tmp_path, monkeypatch):
    inventory = run_plugin(write(tmp_path, CLUSTER), monkeypatch)
    assert [h.name for h in inventory.groups["aorta_nodes"].get_hosts()] == ["mgmt-b", "mgmt-a", "mgmt-c"]
    assert [h.name for h in inventory.groups["aorta_head"].get_hosts()] == ["mgmt-b"]
    assert [h.name for h in inventory.groups["aorta_workers"].get_hosts()] == ["mgmt-a", "mgmt-c"]
    head = hostvars(inventory, "mgmt-b")
    assert head["ansible_host"] == "mgmt-b"
    assert head["ansible_user"] == "alice"
    assert head["ansible_ssh_private_key_file"] == "/keys/alice.pem"
    assert head["aorta_node_rank"] == 0
    assert head["aorta_vpc_ip"] == "10.0.0.2"
    assert head["aorta_bmc_ip"] is None
    assert head["aorta_rack_id"] == "r1"
    assert head["gpu_sku"] == "MI300X"
    assert hostvars(inventory, "mgmt-c")["aorta_vpc_ip"] == "10.0.0.3"
    assert hostvars(inventory, "mgmt-c")["aorta_node_rank"] == 2
    group = inventory.groups["aorta_nodes"].get_vars()
    assert group["aorta_cluster_env"] == {"NCCL_DEBUG": "INFO"}
    assert group["aorta_cluster_orchestrator"] == "container"
    assert group["aorta_cluster_container"]["image"] == "rocm/aorta:1"


def test_switch_credentials_never_become_variables(tmp_path, monkeypatch):
    inventory = run_plugin(write(tmp_path, CLUSTER), monkeypatch)
    everything = json.dumps(
        [hostvars(inventory, h) for h in inventory.hosts] + [g.get_vars() for g in inventory.groups.values()],
        default=str,
    )
    assert "do-not-leak" not in everything
    assert "racks" not in everything


def test_connection_vars_can_be_switched_off_for_awx(tmp_path, monkeypatch):
    write(tmp_path, CLUSTER)
    source = tmp_path / "prod.cluster_json.yml"
    source.write_text("plugin: aorta.cluster.cluster_json\npath: cluster.json\nconnection_vars: false\n")
    inventory = run_plugin(source, monkeypatch)
    head = hostvars(inventory, "mgmt-b")
    assert "ansible_user" not in head
    assert "ansible_ssh_private_key_file" not in head
    assert head["aorta_vpc_ip"] == "10.0.0.2"


def test_password_becomes_ansible_password(tmp_path, monkeypatch):
    data = dict(CLUSTER, password="pw")
    del data["priv_key_file"]
    inventory = run_plugin(write(tmp_path, data), monkeypatch)
    head = hostvars(inventory, "mgmt-b")
    assert head["ansible_password"] == "pw"
    assert "ansible_ssh_private_key_file" not in head


def test_yaml_source_resolves_path_from_its_own_directory(tmp_path, monkeypatch):
    (tmp_path / "inv").mkdir()
    write(tmp_path / "inv", CLUSTER, "cluster.json")
    source = tmp_path / "inv" / "aorta.yml"
    source.write_text(
        "plugin: 'aorta.cluster.cluster_json'\npath: cluster.json\n"
        "keyed_groups:\n  - key: aorta_rack_id\n    prefix: rack\n"
        "groups:\n  first_two: aorta_node_rank < 2\n"
        "compose:\n  aorta_fabric_url: \"'tcp://' ~ aorta_vpc_ip\"\n"
    )
    monkeypatch.chdir(tmp_path)
    inventory = run_plugin(source, monkeypatch)
    assert {h.name for h in inventory.groups["rack_r1"].get_hosts()} == {"mgmt-b"}
    assert {h.name for h in inventory.groups["rack_r2"].get_hosts()} == {"mgmt-a"}
    assert {h.name for h in inventory.groups["first_two"].get_hosts()} == {"mgmt-b", "mgmt-a"}
    assert hostvars(inventory, "mgmt-a")["aorta_fabric_url"] == "tcp://10.0.0.1"


def test_yaml_source_without_path_is_a_clear_error(tmp_path, monkeypatch):
    source = tmp_path / "aorta.yml"
    source.write_text("plugin: aorta.cluster.cluster_json\n")
    monkeypatch.delenv("AORTA_CLUSTER_FILE", raising=False)
    with pytest.raises(SystemExit, match=r"aorta.yml: path: not set \(nor AORTA_CLUSTER_FILE\)"):
        run_plugin(source, monkeypatch)


def test_yaml_source_takes_the_file_from_an_awx_credential_env(tmp_path, monkeypatch):
    """An AWX credential injector writes the file and sets AORTA_CLUSTER_FILE to its path."""
    injected = write(tmp_path, CLUSTER, "tmpabc123")
    source = tmp_path / "aorta.yml"
    source.write_text("plugin: aorta.cluster.cluster_json\nconnection_vars: false\n")
    monkeypatch.setenv("AORTA_CLUSTER_FILE", str(injected))
    inventory = run_plugin(source, monkeypatch)
    assert [h.name for h in inventory.groups["aorta_nodes"].get_hosts()] == ["mgmt-b", "mgmt-a", "mgmt-c"]
    assert "ansible_user" not in hostvars(inventory, "mgmt-a")
    assert inventory.groups["aorta_nodes"].get_vars()["aorta_cluster_file"] == str(injected)


def test_foreign_yaml_and_json_are_declined(tmp_path):
    plugin = InventoryModule()
    other = tmp_path / "hosts.yml"
    other.write_text("all:\n  hosts:\n    a:\n")
    assert not plugin.verify_file(str(other))
    commented = tmp_path / "x.yml"
    commented.write_text("# plugin: aorta.cluster.cluster_json\nall: {}\n")
    assert not plugin.verify_file(str(commented))
    assert not plugin.verify_file(str(write(tmp_path, {"all": {}}, "hosts.json")))


def test_broken_cluster_file_is_claimed_and_rejected_in_one_line(tmp_path, monkeypatch):
    path = write(tmp_path, '{"username": "u", "node_dict": {"a": ', "site-cluster.json")
    with pytest.raises(SystemExit) as info:
        run_plugin(path, monkeypatch)
    message = str(info.value)
    assert message.startswith(f"{path}: not valid JSON at line 1")
    assert "\n" not in message


def test_values_are_not_templated(tmp_path, monkeypatch):
    data = json.loads(json.dumps(CLUSTER))
    data["node_dict"]["mgmt-b"]["note"] = "{{ lookup('pipe', 'id') }}"
    inventory = run_plugin(write(tmp_path, data), monkeypatch)
    loader = DataLoader()
    templar = Templar(loader=loader, variables=hostvars(inventory, "mgmt-b"))
    assert templar.template(trust_as_template("{{ note }}")) == "{{ lookup('pipe', 'id') }}"


def test_no_vpc_ip_anywhere_is_one_warning_and_the_keys_carry_the_fabric(tmp_path, monkeypatch):
    data = dict(CLUSTER, node_dict={f"mgmt-{i}": {"bmc_ip": "NA"} for i in range(1000)})
    data["node_dict"]["mgmt-1"]["vpc_ip"] = ""
    path = write(tmp_path, data)
    warnings = Warnings()
    inventory = run_plugin(path, monkeypatch, warnings=warnings)
    assert hostvars(inventory, "mgmt-7")["aorta_vpc_ip"] == "mgmt-7"
    assert warnings == [
        f"{path}: node_dict: no node has a vpc_ip, so the management network (the node_dict keys) carries the "
        "fabric traffic too (rendezvous and collectives); give every node its vpc_ip to use a separate fabric"
    ]
    # A file where every node has one: no warning.
    quiet = Warnings()
    run_plugin(write(tmp_path, CLUSTER, "other-cluster.json"), monkeypatch, warnings=quiet)
    assert quiet == []


def test_vpc_ip_on_some_nodes_only_is_rejected_in_one_line_naming_them(tmp_path, monkeypatch):
    data = json.loads(json.dumps(CLUSTER))
    data["node_dict"]["mgmt-c"]["vpc_ip"] = "NA"
    data["node_dict"]["mgmt-d"] = {}
    path = write(tmp_path, data)
    with pytest.raises(SystemExit) as info:
        run_plugin(path, monkeypatch)
    assert str(info.value) == (
        f"{path}: node_dict: vpc_ip missing on mgmt-c, mgmt-d (the other 2 nodes have one); "
        "give every node its fabric address or none"
    )
