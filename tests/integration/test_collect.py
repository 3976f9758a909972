# SPDX-License-Identifier: GPL-3.0-or-later
"""Trace collection on the stand-in cluster: verified, never mixed with earlier runs, salvaged."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import OLD_TRACE, plant

pytestmark = pytest.mark.standin
REPO = Path(__file__).resolve().parents[2]


def trace_collect(cluster, **extra_vars):
    """playbooks/trace_collect.yml on the stand-in's cluster file and vars, with ``extra_vars``."""
    return cluster._run(
        "ansible-playbook",
        "playbooks/trace_collect.yml",
        "-i",
        str(cluster.cluster_json),
        "-e",
        f"@{cluster.vars_yml}",
        "-e",
        json.dumps(extra_vars),
        timeout=300,
    )


@pytest.mark.xdist_group("healthy_run")
def test_completed_run_is_collected_once_verified_and_alone_then_survives_an_unreachable_node(
    standin_cluster, healthy_run, tmp_path
):
    nodes = standin_cluster.nodes
    # The shared healthy run planted, before it ran, an earlier run's trace in this run's own
    # directory (older than the start floor) and a fresh trace of another run elsewhere under
    # aorta_path: neither may be collected.
    run_id, proc, run, results = healthy_run.run_id, healthy_run.proc, healthy_run.run, healthy_run.results
    assert proc.returncode == 0, proc.stdout[-3000:]
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    world = 2 * len(nodes)
    assert manifest["found_ranks"] == list(range(world))
    assert manifest["missing_ranks"] == [] and manifest["ranks_in_several_files"] == {}
    assert run["combined_traces"]["missing_ranks"] == []
    listed = []
    for entry in manifest["nodes"]:
        node_index = entry["rank"]
        assert entry["collected"] and entry["state"] == "ok"
        assert entry["vpc_ip"] == nodes[node_index]["vpc_ip"] and entry["mgmt_ip"] == nodes[node_index]["mgmt_ip"]
        for item in entry["files"]:
            listed.append(item["path"])
            original = f"/root/aorta/aorta_runs/{run_id}/{item['path']}"
            node_sum = standin_cluster.node_exec(node_index, "sha256sum", original).split()[0]
            local = results / "combined_traces" / f"node_{node_index}" / item["path"]
            assert item["sha256"] == node_sum
            assert (
                subprocess.run(["sha256sum", str(local)], capture_output=True, text=True, check=True).stdout.split()[0]
                == node_sum
            )
    assert not any("rank99" in p or "rank98" in p for p in listed)
    assert not list((results / "combined_traces").rglob("old.json"))
    assert not (results / ".staging").exists()

    # The same run collected again while one node is unreachable: recorded as missing, the
    # others complete.
    victim = nodes[-1]
    again = tmp_path / "again"
    subprocess.run(["docker", "pause", victim["container"]], check=True)
    try:
        proc = trace_collect(
            standin_cluster,
            aorta_run_id=run_id,
            aorta_results_dir=str(again),
            aorta_connect_timeout=10,
            aorta_collect_since=0,
        )
    finally:
        subprocess.run(["docker", "unpause", victim["container"]], check=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    manifest = json.loads((again / "combined_traces" / "manifest.json").read_text())
    assert manifest["unreachable_nodes"] == [victim["mgmt_ip"]]
    assert manifest["nodes_not_collected"] == [victim["mgmt_ip"]]
    assert manifest["missing_ranks"] == [world - 2, world - 1]
    assert manifest["nodes"][0]["collected"]


def test_failed_node_is_marked_and_the_others_traces_are_kept(standin_cluster, tmp_path):
    nodes = standin_cluster.nodes
    world = 2 * len(nodes)
    failing = world - 1
    proc, run, results, _elapsed = standin_cluster.run(
        tmp_path, aorta_training_overrides={"standin.fail_rank": failing, "standin.fail_step": 6}
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert run["first_failure"] == nodes[-1]["mgmt_ip"]
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    assert manifest["missing_ranks"] == [failing]
    assert manifest["found_ranks"] == list(range(world - 1))
    last = manifest["nodes"][-1]
    assert last["name"] == nodes[-1]["mgmt_ip"] and last["state"] == "failed"
    assert run["combined_traces"]["missing_ranks"] == [failing]


def test_straggler_node_is_named_in_the_report_after_a_run(standin_cluster, tmp_path):
    nodes = standin_cluster.nodes
    slow = 2 * len(nodes) - 1
    proc, _run, results, _elapsed = standin_cluster.run(
        tmp_path,
        aorta_training_overrides={
            "standin.slow_rank": slow,
            "standin.slow_factor": 6,
            # Six profiled steps: at 5% significance the rank test needs the slow rank slowest in 5
            # of 6 (with 4, in all 4): one step where its node's other rank, which shares its CPU
            # with the slow one's busy loop, came last left it unnamed once (a 2-core machine).
            "training.max_steps": 10,
            "profiling.active": 6,
        },
    )
    report = json.loads((results / "aorta_benchmark_report.json").read_text())
    assert report["status"] == "completed"
    assert report["cluster"]["nodes"] == len(nodes)
    assert [s["rank"] for s in report["stragglers"]][:1] == [slow]
    assert report["stragglers"][0]["node"] == nodes[-1]["mgmt_ip"]
    # A slow rank is a finding: the run completed, and its verdict fails naming the rank, the play
    # exits non-zero, and run.json, the report and the console's last line say the same.
    verdict = json.loads((results / "run.json").read_text())["verdict"]
    assert proc.returncode != 0 and verdict["verdict"] == "FAIL" and "straggler" in verdict["findings"], verdict
    said = f"straggler: rank {slow} on node {nodes[-1]['mgmt_ip']}: "
    assert any(reason.startswith(said) for reason in verdict["reasons"]), verdict
    assert report["verdict"] == verdict
    assert [line for line in proc.stdout.splitlines() if "verdict FAIL: " in line], proc.stdout[-2000:]
    assert (results / "report.html").exists() and (results / "per_rank.csv").exists()


def test_a_sampled_run_keeps_the_middle_nodes_traces_where_they_are_and_pulls_them_later(standin_cluster, tmp_path):
    """aorta_collect_traces auto above aorta_collect_all_max_nodes: every node analyses its own traces
    and sends back its summary file; the head's traces come at the end, the slow rank's node's after
    the report names it; the middle node's stay on it, listed with hashes, until trace_collect.yml
    pulls them by name."""
    nodes = standin_cluster.nodes
    slow = 2 * len(nodes) - 1
    run_id = f"sampled-{uuid.uuid4().hex[:6]}"
    proc, run, results, _elapsed = standin_cluster.run(
        tmp_path,
        aorta_run_id=run_id,
        aorta_collect_all_max_nodes=2,
        aorta_collect_sample_nodes=0,
        # The slow rank kept a note: this run is about where the traces are, and passes.
        aorta_verdict_ignores=["straggler", "slow_node"],
        aorta_training_overrides={
            "standin.slow_rank": slow,
            "standin.slow_factor": 6,
            # Six profiled steps: at 5% significance the rank test needs the slow rank slowest in 5
            # of 6 (with 4, in all 4): one step where its node's other rank, which shares its CPU
            # with the slow one's busy loop, came last left it unnamed once (a 2-core machine).
            "training.max_steps": 10,
            "profiling.active": 6,
        },
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED"
    report = json.loads((results / "aorta_benchmark_report.json").read_text())
    assert "straggler" in report["verdict"]["ignored"] and report["verdict"]["verdict"] == "PASS", report["verdict"]
    assert [s["rank"] for s in report["stragglers"]][:1] == [slow]
    assert report["stragglers"][0]["node"] == nodes[-1]["mgmt_ip"]
    # The report came from the nodes' summaries, made where the traces lie, one file per node.
    assert sorted(p.name for p in (results / "node_summaries").iterdir()) == [f"node_{i}.json.gz" for i in range(3)]
    # It says whose traces it held in full when it was written: the head's (the slow node's came after).
    assert report["traces_in_full"] == [nodes[0]["mgmt_ip"]] and report["missing_ranks"] == []
    assert report["summaries_only"] == sorted(n["mgmt_ip"] for n in nodes[1:])
    assert report["node_analysis"]["nodes"] == len(nodes)
    tree = results / "combined_traces"
    manifest = json.loads((tree / "manifest.json").read_text())
    rows = {entry["rank"]: entry for entry in manifest["nodes"]}
    # The head's traces at the end, the slow rank's node's after the report named it.
    assert rows[0]["collected"] and "pulled" not in rows[0]
    assert rows[2]["collected"] and rows[2]["pulled"]["why"] == "named by the analysis"
    assert (tree / "node_0").is_dir() and (tree / "node_2").is_dir()
    # The middle node's stay on it: listed with the hashes the node read, not copied.
    middle = rows[1]
    assert middle["on_node"]["root"] == f"/root/aorta/aorta_runs/{run_id}" and not middle["collected"]
    assert manifest["nodes_on_node"] == [nodes[1]["mgmt_ip"]] and manifest["nodes_not_collected"] == []
    assert not (tree / "node_1").exists() and middle["files"]
    for item in middle["files"]:
        original = f"/root/aorta/aorta_runs/{run_id}/{item['path']}"
        assert item["sha256"] == standin_cluster.node_exec(1, "sha256sum", original).split()[0]
    assert manifest["missing_ranks"] == []  # its ranks are known, on the node
    # docs/manifest.md shows docs/samples/manifest.json as what a sampled run writes: it must keep holding.
    (tmp_path / "manifest-before-pull.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    sample = json.loads((REPO / "docs" / "samples" / "manifest.json").read_text())
    assert set(manifest) == set(sample)
    assert [set(rows[rank]) for rank in range(3)] == [set(entry) for entry in sample["nodes"]]
    # A node's end result stayed small: the summary and the rows travelled as files.
    assert "summaries" not in proc.stdout

    # Later: the middle node's traces, by name, into the same tree, verified against the manifest.
    proc = trace_collect(
        standin_cluster,
        aorta_run_id=run_id,
        aorta_results_dir=str(results),
        aorta_collect_nodes=[nodes[1]["mgmt_ip"]],
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    after = json.loads((tree / "manifest.json").read_text())
    pulled = next(entry for entry in after["nodes"] if entry["rank"] == 1)
    assert pulled["collected"] and pulled["pulled"]["why"] == "asked" and after["nodes_on_node"] == []
    assert [(f["path"], f["sha256"]) for f in pulled["files"]] == [(f["path"], f["sha256"]) for f in middle["files"]]
    for item in pulled["files"]:
        local = tree / "node_1" / item["path"]
        digest = subprocess.run(["sha256sum", str(local)], capture_output=True, text=True, check=True).stdout.split()[0]
        assert digest == item["sha256"]
    assert not (results / ".pull").exists()


def test_single_node_script_mode_is_collected_from_the_configs_output_dir(standin_cluster, tmp_path):
    """One node without overrides, launch mode auto -> script (CVS): the experiment script gets only
    the config, so Aorta writes to the config's training.output_dir; that run's files are collected
    from there, an earlier run's file in the same directory is not. (With aorta_training_overrides,
    auto runs torchrun on one node: the script takes no --override; unit-tested in test_launch.)"""
    plant(standin_cluster, 0, "/root/aorta/artifacts/standin/torch_profiler/rank7/old.json", OLD_TRACE, 2)
    cluster = standin_cluster.cluster_file(tmp_path, 1)
    try:
        proc, run, results, _elapsed = standin_cluster.run(tmp_path, inventory=cluster, aorta_training_overrides={})
    finally:
        standin_cluster.node_exec(0, "rm", "-rf", "/root/aorta/artifacts")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED" and run["context"]["launch_mode"] == "script", run["context"]
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    assert manifest["expected_ranks"] == [0, 1] and manifest["missing_ranks"] == []
    assert not list((results / "combined_traces").rglob("old.json"))
    report = json.loads((results / "aorta_benchmark_report.json").read_text())
    assert report["status"] == "completed" and [r["rank"] for r in report["per_rank_summary"]] == [0, 1]
