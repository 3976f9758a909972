# SPDX-License-Identifier: GPL-3.0-or-later
"""node_prepare over a two-node "cluster" of local hosts: the head first (its lease, the port picked
on it), then the worker (its lease, one TCP connection to the head's address); a partial cluster
refused before any node is touched; a worker not named for a head that failed."""

from __future__ import annotations

import json

from ansible_collections.aorta.cluster.plugins.action.node_prepare import excluded_nodes

PREPARE = {"name": "Probe", "aorta.cluster.node_prepare": None, "register": "aorta_prepare", "timeout": 120}


def run_vars(tmp_path):
    aorta = tmp_path / "aorta"
    (aorta / "config").mkdir(parents=True, exist_ok=True)
    (aorta / "config" / "distributed.yaml").write_text("training: {batch_size: 4}\n")
    (aorta / "train.py").write_text("")
    return {
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


def test_the_head_picks_the_port_and_the_worker_reaches_it(cluster_play, tmp_path):
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=run_vars(tmp_path))
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    assert not head.get("failed") and not worker.get("failed"), (head.get("msg"), worker.get("msg"))
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
    assert head["failed"] and "preflight[aorta_path]: localhost: train.py not found" in head["msg"]
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
