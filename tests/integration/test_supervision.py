# SPDX-License-Identifier: GPL-3.0-or-later
"""Node-side supervision on the stand-in cluster: a controller killed mid-run, two runs started
together, and forks far below the node count.

Each test drives the real playbook over SSH; nodes run real torchrun in real containers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STATUS_DIR = "/var/tmp/aorta-cluster"


def start_playbook(cluster, tmp_path, run_id, *extra_args, **extra_vars):
    """ansible-playbook in its own session (so a kill reaches every fork and ssh); output to a file."""
    results = tmp_path / f"results-{run_id}"
    log = open(tmp_path / f"{run_id}.out", "w")  # noqa: SIM115 (the process writes it after we return)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    argv = [
        str(BIN / "ansible-playbook"),
        "aorta_multinode.yml",
        "-i",
        str(extra_vars.pop("inventory", cluster.cluster_json)),
        "-e",
        f"@{cluster.vars_yml}",
        "-e",
        json.dumps({"aorta_results_dir": str(results), "aorta_run_id": run_id, **extra_vars}),
        *extra_args,
    ]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, results, tmp_path / f"{run_id}.out"


def node_status(cluster, index, run_id):
    out = cluster.node_exec(index, "cat", f"{STATUS_DIR}/runs/{run_id}.json", check=False)
    try:
        return json.loads(out)
    except ValueError:
        return None


def workload_processes(cluster):
    return [
        line
        for i in range(len(cluster.nodes))
        for line in cluster.node_exec(i, "ps", "-eo", "args").splitlines()
        if "torchrun" in line or "train.py" in line
    ]


def containers_of_node(cluster, index, run_id):
    return cluster.node_exec(index, "docker", "ps", "-aq", "--filter", f"label=aorta.cluster.run={run_id}").split()


def containers_of(cluster, run_id):
    return [c for i in range(len(cluster.nodes)) for c in containers_of_node(cluster, i, run_id)]


def wait_until_training(cluster, indexes, run_id, proc, out):
    """Until the supervisors of those nodes say running and every one of their ranks made a step."""
    for _attempt in range(240):
        statuses = [node_status(cluster, i, run_id) for i in indexes]
        if all(s and s["state"] == "running" and min(s["progress"].values() or [0]) > 0 for s in statuses):
            return
        assert proc.poll() is None, out.read_text()[-3000:]
        time.sleep(1)
    raise AssertionError("the ranks never started training: " + out.read_text()[-3000:])


def test_controller_killed_mid_run_the_nodes_end_the_run_themselves_and_a_new_run_refuses(standin_cluster, tmp_path):
    deadline, grace = 90, 10
    run_id = "killed-" + uuid.uuid4().hex[:6]
    proc, _results, out = start_playbook(
        standin_cluster,
        tmp_path,
        run_id,
        aorta_timeout_seconds=deadline,
        aorta_kill_grace_seconds=grace,
        aorta_collect_traces=False,
        aorta_training_overrides={"training.max_steps": 1000000},
    )
    try:
        # Kill the controller once every node's ranks are training.
        wait_until_training(standin_cluster, range(len(standin_cluster.nodes)), run_id, proc, out)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = time.monotonic()
    assert len(workload_processes(standin_cluster)) > 0  # the orphan trains on, for now

    # A second run started right away must not launch beside it: it refuses, naming the holder.
    second = standin_cluster.run(tmp_path, aorta_collect_traces=False)
    proc2, run2, _results2, _elapsed2 = second
    assert proc2.returncode != 0
    assert run2["status"] == "FAILED"
    assert f"run {run_id}" in run2["message"] and "held by" in run2["message"]
    assert "owner root@" in run2["message"] and "lease until" in run2["message"]
    assert {n["state"] for n in run2["nodes"]} == {"not_started"}
    assert containers_of(standin_cluster, run2["run_id"]) == []

    # With no controller, every node stops its workload at the deadline and removes its container.
    bound = deadline + grace + 60
    while time.monotonic() - killed < bound:
        if not containers_of(standin_cluster, run_id) and not workload_processes(standin_cluster):
            break
        time.sleep(2)
    gone_after = time.monotonic() - killed
    assert containers_of(standin_cluster, run_id) == [], f"container still there {gone_after:.0f}s after the kill"
    assert workload_processes(standin_cluster) == []
    for i in range(len(standin_cluster.nodes)):
        status = node_status(standin_cluster, i, run_id)
        assert status["state"] == "finished" and status["outcome"] == "timeout", status
        what = [e["what"] for e in status["events"]]
        assert what.index("deadline of 90s reached") < what.index("SIGTERM sent")
        # Stopped on the node's own clock: the deadline counted from the node's launch.
        assert deadline <= status["events"][what.index("SIGTERM sent")]["elapsed_s"] < deadline + 20
        # The lease went with the supervisor.
        assert standin_cluster.node_exec(i, "ls", STATUS_DIR).split().count("node.lease") == 0


def test_two_runs_started_together_exactly_one_launches(standin_cluster, tmp_path):
    ids = ["twin-a-" + uuid.uuid4().hex[:4], "twin-b-" + uuid.uuid4().hex[:4]]
    procs = [start_playbook(standin_cluster, tmp_path, rid, aorta_collect_traces=False) for rid in ids]
    for proc, _results, _out in procs:
        proc.wait(timeout=600)
    runs = [json.loads((results / "run.json").read_text()) for _proc, results, _out in procs]
    outcomes = sorted((run["status"], run["run_id"]) for run in runs)
    assert [o[0] for o in outcomes] == ["COMPLETED", "FAILED"], outcomes
    winner = next(r for r in runs if r["status"] == "COMPLETED")
    loser = next(r for r in runs if r["status"] == "FAILED")
    assert f"held by run {winner['run_id']}" in loser["message"]
    assert "preflight" in loser["message"].lower() or "Hold the head" in loser["message"]
    assert {n["state"] for n in loser["nodes"]} == {"not_started"}
    assert standin_cluster.containers_left() == []


@pytest.mark.parametrize("forks,nodes", [(1, 2), (2, 3)])
def test_forks_below_the_node_count_complete_and_print_progress_not_retries(standin_cluster, tmp_path, forks, nodes):
    inventory = standin_cluster.cluster_file(tmp_path, nodes)
    results = tmp_path / "results"
    proc = standin_cluster.playbook(
        "--forks", str(forks), "-e", json.dumps({"aorta_results_dir": str(results)}), inventory=inventory
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    run = json.loads((results / "run.json").read_text())
    assert run["status"] == "COMPLETED" and [n["state"] for n in run["nodes"]] == ["ok"] * nodes
    assert "FAILED - RETRYING" not in proc.stdout
    assert re.search(rf"^running \d+/{nodes} nodes", proc.stdout, re.M), proc.stdout[-3000:]
    assert standin_cluster.containers_left() == []


def test_a_node_that_dies_mid_run_is_named_and_the_others_are_still_collected(standin_cluster, tmp_path):
    """Last in this file: it kills a stand-in node (and restarts it for the fixture's teardown)."""
    deadline, grace = 120, 10
    victim = standin_cluster.nodes[-1]
    run_id = "node-death-" + uuid.uuid4().hex[:6]
    proc, results, out = start_playbook(
        standin_cluster,
        tmp_path,
        run_id,
        aorta_timeout_seconds=deadline,
        aorta_kill_grace_seconds=grace,
        aorta_training_overrides={"training.max_steps": 1000000},
    )
    try:
        wait_until_training(standin_cluster, [len(standin_cluster.nodes) - 1], run_id, proc, out)
        subprocess.run(["docker", "kill", victim["container"]], check=True, capture_output=True)
        killed = time.monotonic()
        proc.wait(timeout=deadline + grace + 300)
        ended_after = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run(["docker", "start", victim["container"]], check=True, capture_output=True)
    run = json.loads((results / "run.json").read_text())
    assert proc.returncode != 0
    assert run["status"] == "FAILED" and run["first_failure"] == victim["mgmt_ip"], run["message"]
    assert ended_after < deadline + grace + 60, ended_after
    states = {n["name"]: n["state"] for n in run["nodes"]}
    assert states[victim["mgmt_ip"]] == "unreachable"
    assert "setup stopped" not in run["message"]
    # The collection and the report still ran for the others; the dead node is recorded, not fatal.
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    collected = {n["name"]: n["collected"] for n in manifest["nodes"]}
    assert collected.pop(victim["mgmt_ip"]) is False and all(collected.values()), manifest["nodes"]
    assert (results / "aorta_benchmark_report.json").exists()
    for i in range(len(standin_cluster.nodes) - 1):
        assert containers_of_node(standin_cluster, i, run_id) == []
