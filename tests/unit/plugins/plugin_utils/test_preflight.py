# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight's judgement of a node's probe: one message per failed check, naming node, check and fix."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils._preflight import GIB, interface_holding, judge


def facts(**over):
    base = {
        "docker": {"ok": True, "version": "27.1", "error": ""},
        "image_id": "sha256:abc",
        "paths": {"config/distributed.yaml": True, "train.py": True},
        "disk": {"path": "/home/me/aorta", "free_bytes": 50 * GIB, "error": ""},
        "gpu_devices": {"/dev/kfd": True, "/dev/dri": True},
        "gpus": {"count": 8, "tool": "amd-smi"},
        "interfaces": {"lo": ["127.0.0.1"], "eth0": ["192.168.1.5"], "ens51": ["10.224.0.11", "fe80::1"]},
        "error": "",
    }
    base.update(over)
    return base


def expect(**over):
    base = {
        "image": "rocm/pytorch:x",
        "image_archive": "",
        "archive_exists": False,
        "aorta_path": "/home/me/aorta",
        "paths": ["config/distributed.yaml", "train.py"],
        "min_free_gb": 10,
        "require_gpu": True,
        "gpus_needed": 8,
        "vpc_ip": "10.224.0.11",
        "extra_env": {},
    }
    base.update(over)
    return base


def test_a_healthy_node_passes_and_derives_the_fabric():
    verdict = judge("n1", facts(), expect())
    assert verdict["failures"] == []
    derived = verdict["derived"]
    assert derived["fabric_if"] == "ens51"
    assert derived["fabric_env"] == {"GLOO_SOCKET_IFNAME": "ens51", "NCCL_SOCKET_IFNAME": "ens51"}
    assert derived["bootstrap_ip"] == "10.224.0.11"
    assert derived["record"] == {
        "docker": "27.1",
        "image_present": True,
        "free_gib": 50.0,
        "fabric_ip": "10.224.0.11",
        "fabric_if": "ens51",
    }


@pytest.mark.parametrize(
    "probe,wanted,message",
    [
        (
            {"docker": {"ok": False, "error": "Cannot connect"}},
            {},
            "preflight[docker]: n1: docker does not answer: Cannot connect",
        ),
        (
            {"image_id": None},
            {"image_archive": "/x/img.tar"},
            "preflight[image]: n1: rocm/pytorch:x is not on the node and the archive /x/img.tar does not exist",
        ),
        (
            {"paths": {"config/distributed.yaml": True}},
            {},
            "preflight[aorta_path]: n1: train.py not found under /home/me/aorta",
        ),
        (
            {"disk": {"free_bytes": 3 * GIB}},
            {},
            "preflight[disk]: n1: 3.0 GiB free at /home/me/aorta, 10 GiB needed",
        ),
        ({"disk": {"free_bytes": None, "error": "No such file"}}, {}, "preflight[disk]: n1: cannot read free space"),
        ({"gpu_devices": {"/dev/kfd": False, "/dev/dri": True}}, {}, "preflight[gpu]: n1: /dev/kfd is missing"),
        ({"gpus": {"count": 4}}, {}, "preflight[gpu]: n1: 4 GPUs seen by amd-smi/rocm-smi, 8 needed"),
        ({}, {"vpc_ip": "10.9.9.9"}, "preflight[fabric]: n1: no interface holds the fabric address (vpc_ip) 10.9.9.9"),
        (
            {},
            {"extra_env": {"GLOO_SOCKET_IFNAME": "ib0"}},
            "preflight[fabric]: n1: GLOO_SOCKET_IFNAME=ib0 names no interface of this node (it has lo, eth0, ens51;",
        ),
    ],
)
def test_each_failed_check_is_one_line_naming_node_and_check(probe, wanted, message):
    failures = judge("n1", facts(**probe), expect(**wanted))["failures"]
    assert len(failures) == 1 and failures[0].startswith(message), failures


def test_a_missing_image_with_no_archive_is_pulled_later_not_failed():
    assert judge("n1", facts(image_id=None), expect())["failures"] == []


def test_gpus_are_not_judged_without_require_gpu():
    assert (
        judge("n1", facts(gpus={"count": None}, gpu_devices={"/dev/kfd": False}), expect(require_gpu=False))["failures"]
        == []
    )


def test_a_forced_interface_wins_and_the_bootstrap_address_is_on_it():
    derived = judge("n1", facts(), expect(extra_env={"GLOO_SOCKET_IFNAME": "eth0"}))["derived"]
    assert derived["fabric_env"] == {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "ens51"}
    assert derived["bootstrap_ip"] == "192.168.1.5"
    negated = judge("n1", facts(), expect(extra_env={"NCCL_SOCKET_IFNAME": "^=eth0,ens51"}))
    assert negated["failures"] == []


def test_interface_holding_names_what_the_node_has():
    assert interface_holding({"a": ["10.0.0.1"], "b": ["fd00::2"]}, "fd00::2") == "b"
    with pytest.raises(LaunchError, match=r"n9: no interface holds .* 10\.0\.0\.9; it has a=10\.0\.0\.1$"):
        interface_holding({"a": ["10.0.0.1"], "lo0": []}, "10.0.0.9", "n9")


def test_a_worker_that_cannot_reach_the_head_names_the_interface_and_why_it_was_chosen():
    head = {"head": "gpu-a", "head_port": 29517, "head_address": "192.168.1.1"}
    unreached = {"reached": False, "error": "no answer within 30s", "host": "192.168.1.1"}
    forced = judge("n1", facts(connect=unreached), expect(extra_env={"GLOO_SOCKET_IFNAME": "eth0"}, **head))
    assert forced["failures"] == [
        "preflight[fabric]: n1 (10.224.0.11 on ens51) cannot reach the head gpu-a at 192.168.1.1 port 29517, "
        "its address on GLOO_SOCKET_IFNAME=eth0 (set by aorta_extra_env; the fabric address 10.224.0.11 is on "
        "ens51): no answer within 30s"
    ]
    plain = judge("n1", facts(connect=dict(unreached, host="10.224.0.1")), expect(**head))["failures"]
    assert plain[0].endswith("its address on GLOO_SOCKET_IFNAME=ens51 (the fabric interface): no answer within 30s")
    # A refusal is an answer (the path is there); the head is not probed by itself.
    assert judge("n1", facts(connect={"reached": True, "error": ""}), expect(**head))["failures"] == []
    assert judge("n1", facts(), expect())["failures"] == []
