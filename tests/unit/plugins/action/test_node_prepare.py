# SPDX-License-Identifier: GPL-3.0-or-later
"""node_prepare over a two-node "cluster" of local hosts: the head first (its lease, the port picked
on it), then the worker (its lease, one TCP connection to the head's address); a partial cluster
refused before any node is touched; a worker not named for a head that failed; an image no node
can have named by preflight. A docker CLI stand-in answers: no test pulls from a registry."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from ansible_collections.aorta.cluster.plugins.action.node_prepare import excluded_nodes

# "docker pull" of a tag the registry does not have, as docker 27 says it.
MANIFEST_UNKNOWN = (
    "Error response from daemon: manifest for rocm/pytorch:nope not found: manifest unknown: manifest unknown"
)
DOCKER = """#!/bin/sh
here=%s
echo "$*" >> "$here/calls"
key() { printf %%s "$1" | tr '/:' '__'; }
case "$1" in
  version) echo 27.1 ;;
  image) [ -f "$here/has-$(key "$5")" ] && echo sha256:abc && exit 0; echo "Error: No such image: $5" >&2; exit 1 ;;
  pull)
    case "$2" in *nope*) echo "%s" >&2; exit 1 ;; esac
    touch "$here/has-$(key "$2")" ;;
esac
exit 0
"""


@pytest.fixture(autouse=True)
def docker_stand_in(tmp_path, monkeypatch):
    """``docker`` on the PATH the nodes' modules see: it has no image until it pulls one, and a tag
    with ``nope`` in it does not exist; every call is kept in ``docker/calls``."""
    where = tmp_path / "docker"
    where.mkdir()
    (where / "docker").write_text(DOCKER % (where, MANIFEST_UNKNOWN))
    (where / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{where}:{os.environ['PATH']}")
    return where


PREPARE = {"name": "Probe", "aorta.cluster.node_prepare": None, "register": "aorta_prepare", "timeout": 120}


def docker_save(path, tags):
    """A plain ``docker save`` archive: a layer and the manifest naming ``tags``."""
    with tarfile.open(path, "w") as tar:
        for name, data in (("l/layer.tar", b"x" * 4096), ("manifest.json", json.dumps([{"RepoTags": tags}]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def run_vars(tmp_path):
    """The run's settings; the image is not on the nodes and comes from an archive on the controller
    that holds it (nothing is pulled: the tests that import these run the real docker)."""
    aorta = tmp_path / "aorta"
    (aorta / "config").mkdir(parents=True, exist_ok=True)
    (aorta / "config" / "distributed.yaml").write_text("training: {batch_size: 4}\n")
    (aorta / "train.py").write_text("")
    return {
        "aorta_image_archive": docker_save(tmp_path / "image.tar", ["aorta-unit-test:absent"]),
        "aorta_run_id_resolved": "prep-run",
        "aorta_results_dir_resolved": str(tmp_path / "results"),
        "aorta_path": str(aorta),
        "aorta_require_gpu": False,
        "aorta_min_free_gb": 0,
        "aorta_docker_image": "aorta-unit-test:absent",
        "aorta_pyspy": "false",
        "aorta_port_range_start": 30300,
        "aorta_port_range_end": 30400,
        "aorta_connect_timeout": 5,
        "aorta_fabric_check_timeout": 5,
    }


def leases(tmp_path):
    return {
        "localhost": {"aorta_lease_dir": str(tmp_path / "lease-0")},
        "127.0.0.1": {"aorta_lease_dir": str(tmp_path / "lease-1")},
    }


def test_the_head_picks_the_port_and_the_worker_reaches_it(cluster_play, tmp_path, docker_stand_in):
    settings = run_vars(tmp_path) | {"aorta_image_archive": ""}  # pulled where missing
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    assert not head.get("failed") and not worker.get("failed"), (head.get("msg"), worker.get("msg"))
    # The head lacked the image and pulled it in its probe; the worker found it there (one docker here).
    assert head["facts"]["pull"]["state"] == "pulled" and head["facts"]["image_id"] == "sha256:abc"
    assert "pull" not in worker["facts"] and worker["derived"]["record"]["image_present"]
    assert (docker_stand_in / "calls").read_text().count("pull ") == 1
    assert 30300 <= head["port"] <= 30400 and "port" not in worker
    assert head["facts"]["read"]["text"].startswith("training")  # the head's config, for the report
    assert "connect" not in head["facts"]
    assert worker["facts"]["connect"]["reached"] and worker["facts"]["connect"]["source"] == "127.0.0.1"
    assert head["lease"]["result"] == worker["lease"]["result"] == "acquired"
    assert head["reached"] and worker["reached"]
    shared = json.loads((tmp_path / "results" / ".plan" / "head.json").read_text())
    assert shared["ok"] and shared["port"] == head["port"] and shared["address"] == "127.0.0.1"


def head_without_its_checkout(tmp_path, **extra):
    """(host_vars, extra_vars) of a two-node run whose head has an empty aorta_path (its preflight
    fails on the missing files) and whose worker has the real one."""
    settings = run_vars(tmp_path) | extra
    host_vars = leases(tmp_path)
    host_vars["localhost"]["aorta_path"] = str(tmp_path / "empty")
    host_vars["127.0.0.1"]["aorta_path"] = settings.pop("aorta_path")
    (tmp_path / "empty").mkdir()
    return host_vars, settings


def test_a_partial_cluster_is_refused_before_any_node_is_touched(cluster_play, tmp_path):
    host_vars = {name: dict(v, aorta_cluster_nodes=3) for name, v in leases(tmp_path).items()}
    _proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=run_vars(tmp_path))
    for result in out["aorta_prepare"].values():
        assert result["failed"] and result["msg"].startswith("2 of 3 nodes: a --limit or an AWX sliced job")
        assert result["reached"] is False
    assert not (tmp_path / "lease-0").exists() and not (tmp_path / "lease-1").exists()


def test_a_worker_is_not_named_for_the_heads_failure(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path)
    _proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    assert head["failed"] and "preflight[aorta_path]: localhost: train.py not found" in head["failures"][1]
    # One line: the first failure and how many more (every one is in failures, for run.json).
    assert head["msg"] == f"{head['failures'][0]} (+1 more in run.json)"
    assert head["msg"].startswith("preflight[aorta_path]: localhost: config/distributed.yaml not found")
    assert head["own"] is True
    assert worker["failed"] and worker["own"] is False and "the head localhost did not pass preflight" in worker["msg"]
    assert not (tmp_path / "lease-1").exists()  # the worker was never touched


def test_with_aorta_exclude_unhealthy_a_failing_head_hands_over_to_the_first_worker_that_passes(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path, aorta_exclude_unhealthy=True)
    proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    # Not failed: left out, with its reasons; the play goes on.
    assert not head.get("failed") and head["excluded"] and "train.py not found" in " ".join(head["failures"])
    assert not worker.get("failed") and worker["elected"] and 30300 <= worker["port"] <= 30400
    shared = json.loads((tmp_path / "results" / ".plan" / "head.json").read_text())
    assert shared["head"] == "127.0.0.1" and shared["ok"] and shared["port"] == worker["port"]
    assert "preflight: 127.0.0.1 is the run's head (the head localhost did not pass preflight)" in proc.stdout
    assert (tmp_path / "lease-0").exists() and (tmp_path / "lease-1").exists()  # each holds its lease
    # The launch reads who was left out from one listing, not from every node's variables.
    excluded = excluded_nodes(str(tmp_path / "results"), settings["aorta_run_id_resolved"])
    assert list(excluded) == ["localhost"] and "train.py not found" in " ".join(excluded["localhost"]["failures"])
    assert excluded_nodes(str(tmp_path / "results"), "another-run") == {}


def test_an_image_the_registry_does_not_have_is_named_by_the_heads_preflight(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_image_archive": ""}
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    said = f"preflight[image]: localhost: rocm/pytorch:nope is not on the node and cannot be pulled: {MANIFEST_UNKNOWN}"
    assert head["failed"] and head["failures"] == [said] and head["msg"] == said
    assert head["facts"]["pull"]["state"] == "failed"
    assert worker["failed"] and worker["own"] is False  # not probed: the head failed first


def test_with_aorta_exclude_unhealthy_every_node_names_the_same_missing_image(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_exclude_unhealthy": True}
    settings["aorta_image_archive"] = ""
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    for name, result in out["aorta_prepare"].items():
        assert result["excluded"] and result["failures"] == [
            f"preflight[image]: {name}: rocm/pytorch:nope is not on the node and cannot be pulled: {MANIFEST_UNKNOWN}"
        ]


def test_an_archive_without_the_image_is_named_before_any_copy_and_nothing_is_pulled(
    cluster_play, tmp_path, docker_stand_in
):
    archive = docker_save(tmp_path / "workload.tar", ["aorta-standin-workload:abc"])
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_image_archive": archive}
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head = out["aorta_prepare"]["localhost"]
    assert head["failures"] == [
        f"preflight[image]: localhost: rocm/pytorch:nope is not on the node and the archive {archive} does not "
        "hold it (it holds aorta-standin-workload:abc)"
    ]
    assert "pull " not in (docker_stand_in / "calls").read_text()
    # The archive that holds it: passes, loaded at the launch.
    holding = docker_save(tmp_path / "right.tar", ["docker.io/rocm/pytorch:nope"])
    _proc, out = cluster_play(
        [PREPARE], host_vars=leases(tmp_path), extra_vars=settings | {"aorta_image_archive": holding}
    )
    assert not out["aorta_prepare"]["localhost"].get("failed"), out["aorta_prepare"]["localhost"].get("msg")
