# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight's judgement of a node's probe: one message per failed check, naming node, check and fix."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._preflight import (
    GIB,
    NODE_MESSAGE_MAX,
    archive_images,
    image_key,
    interface_holding,
    judge,
    message,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError


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
        "image_pull": "",
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
    # Check mode (no pull tried), or a pull under way (the launch's own pull joins it).
    assert judge("n1", facts(image_id=None), expect())["failures"] == []
    pulling = {"state": "pulling", "error": "", "seconds": 2.1, "answer_s": 60}
    verdict = judge("n1", facts(image_id=None, pull=pulling), expect())
    assert verdict["failures"] == [] and verdict["derived"]["record"]["image_pull"] == "pulling"


MANIFEST_UNKNOWN = (
    "Error response from daemon: manifest for rocm/pytorch:x not found: manifest unknown: manifest unknown"
)


@pytest.mark.parametrize(
    "pull,wanted,said",
    [
        (
            {"state": "failed", "error": MANIFEST_UNKNOWN},
            {},
            f"preflight[image]: n1: rocm/pytorch:x is not on the node and cannot be pulled: {MANIFEST_UNKNOWN}",
        ),
        (
            {"state": "no answer", "error": "", "answer_s": 60.0},
            {},
            "preflight[image]: n1: rocm/pytorch:x is not on the node and docker pull had no answer from the "
            "registry in 60 s (a registry or proxy that does not answer?)",
        ),
        (
            None,
            {"image_pull": "never"},
            "preflight[image]: n1: rocm/pytorch:x is not on the node and aorta_image_pull is never (pull it "
            "there, or set aorta_image_archive)",
        ),
        (
            None,
            {"image_archive": "/x/img.tar", "archive_exists": True, "archive_images": ["a:1", "b:2", "c:3", "d:4"]},
            "preflight[image]: n1: rocm/pytorch:x is not on the node and the archive /x/img.tar does not hold it "
            "(it holds a:1, b:2, c:3 and 1 more)",
        ),
        (
            None,
            {"image_archive": "/x/img.tar", "archive_exists": True, "archive_images": []},
            "preflight[image]: n1: rocm/pytorch:x is not on the node and the archive /x/img.tar does not hold it "
            "(it holds no named image)",
        ),
    ],
)
def test_a_missing_image_that_cannot_be_had_is_named_in_preflight(pull, wanted, said):
    probe = {"image_id": None, **({"pull": pull} if pull else {})}
    assert judge("n1", facts(**probe), expect(**wanted))["failures"] == [said]


def test_an_archive_that_holds_the_image_or_cannot_say_is_left_to_the_load():
    held = expect(image_archive="/x/img.tar", archive_exists=True)
    for names in (["docker.io/rocm/pytorch:x"], None):
        assert judge("n1", facts(image_id=None), dict(held, archive_images=names))["failures"] == []
    # A digest is not among an archive's names: the load says.
    by_digest = dict(held, image="rocm/pytorch@sha256:ab", archive_images=["rocm/pytorch:x"])
    assert judge("n1", facts(image_id=None), by_digest)["failures"] == []
    # A node that has the image is not asked anything of the archive, nor of the pull.
    assert judge("n1", facts(pull={"state": "failed"}), dict(held, archive_images=[]))["failures"] == []


def test_image_names_compare_as_docker_does():
    assert image_key("ubuntu") == image_key("docker.io/library/ubuntu:latest") == "ubuntu:latest"
    assert image_key("rocm/pytorch:x") == image_key("docker.io/rocm/pytorch:x")
    assert image_key("localhost:5000/a") == "localhost:5000/a:latest"
    assert image_key("r/a@sha256:ab") == "r/a@sha256:ab"


def save_archive(path, members, compress=False):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue()) if compress else buffer.getvalue())
    return str(path)


def test_the_archive_names_its_images_from_its_index_without_unpacking_it(tmp_path):
    layer = b"x" * 100_000
    manifest = json.dumps([{"Config": "c.json", "RepoTags": ["standin:abc"], "Layers": ["l/layer.tar"]}]).encode()
    saved = save_archive(tmp_path / "a.tar", {"l/layer.tar": layer, "manifest.json": manifest})
    assert archive_images(saved) == ["standin:abc"]
    index = {"manifests": [{"annotations": {"io.containerd.image.name": "docker.io/library/standin:abc"}}]}
    oci = save_archive(tmp_path / "oci.tar", {"blobs/sha256/1": layer, "./index.json": json.dumps(index).encode()})
    assert archive_images(oci) == ["docker.io/library/standin:abc"]
    untagged = save_archive(tmp_path / "id.tar", {"manifest.json": b'[{"Config": "c.json", "RepoTags": null}]'})
    assert archive_images(untagged) == []
    # What cannot be told cheaply is not told: the load says.
    assert archive_images(save_archive(tmp_path / "a.tar.gz", {"manifest.json": manifest}, compress=True)) is None
    assert archive_images(save_archive(tmp_path / "none.tar", {"l/layer.tar": layer})) is None
    assert archive_images(save_archive(tmp_path / "bad.tar", {"manifest.json": b"{not json"})) is None
    assert archive_images(str(tmp_path / "gone.tar")) is None


def test_a_failed_nodes_message_is_its_first_failure_and_a_count_cut_for_the_console():
    assert message(["preflight[disk]: n1: full"]) == "preflight[disk]: n1: full"
    assert message(["preflight[disk]: n1: full", "b", "c"]) == "preflight[disk]: n1: full (+2 more in run.json)"
    assert message([]) == ""
    # ansible-core prints it after "[ERROR]: Task failed: Action failed: ": that line stays under 300.
    cut = message([f"preflight[image]: n1: x cannot be pulled: {'E' * 400}", "b"])
    assert len(cut) == NODE_MESSAGE_MAX and cut.endswith("\u2026(details in run.json)")
    assert len("[ERROR]: Task failed: Action failed: " + cut) < 300


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
