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
import time
import uuid

import pytest
import standin  # tests/standin, put on sys.path by conftest

pytestmark = pytest.mark.standin


def test_controller_killed_mid_run_the_nodes_end_the_run_themselves_then_a_new_run_starts_clean(
    standin_cluster, tmp_path
):
    """No controller at all: the nodes keep the deadline. (A re-run started at once from this host
    stops the orphan first instead: test_faults.py's Ctrl-C case.)"""
    # A run's ranks train within about 15 s of the launch here (a whole healthy run takes about 21 s):
    # 60 s leaves the controller killed well before the deadline.
    deadline, grace = 60, 10
    run_id = "killed-" + uuid.uuid4().hex[:6]
    proc, _results, out = standin_cluster.start(
        tmp_path,
        run_id,
        aorta_timeout_seconds=deadline,
        aorta_kill_grace_seconds=grace,
        aorta_collect_traces=False,
        aorta_training_overrides={"training.max_steps": 1000000},
    )
    try:
        # Kill the controller once every node's ranks are training.
        standin_cluster.wait_until_training(range(len(standin_cluster.nodes)), run_id, proc, out)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = time.monotonic()
    assert len(standin_cluster.workload_processes()) > 0  # the orphan trains on, for now

    # With no controller, every node stops its workload at the deadline and removes its container.
    bound = deadline + grace + 60
    while time.monotonic() - killed < bound:
        if not standin_cluster.containers_of(run_id) and not standin_cluster.workload_processes():
            break
        time.sleep(2)
    gone_after = time.monotonic() - killed
    assert standin_cluster.containers_of(run_id) == [], f"container still there {gone_after:.0f}s after the kill"
    assert standin_cluster.workload_processes() == []
    for i in range(len(standin_cluster.nodes)):
        status = standin_cluster.node_status(i, run_id)
        assert status["state"] == "finished" and status["outcome"] == "timeout", status
        what = [e["what"] for e in status["events"]]
        assert what.index(f"deadline of {deadline}s reached") < what.index("SIGTERM sent")
        # Stopped on the node's own clock: the deadline counted from the node's launch.
        assert deadline <= status["events"][what.index("SIGTERM sent")]["elapsed_s"] < deadline + 20
        # The lease went with the supervisor.
        assert standin_cluster.node_exec(i, "ls", standin_cluster.status_dir).split().count("node.lease") == 0

    # The next run finds the nodes clean.
    proc2, run2, _results2, _elapsed2 = standin_cluster.run(tmp_path, aorta_collect_traces=False)
    assert proc2.returncode == 0 and run2["status"] == "COMPLETED", run2 and run2["message"]
    assert "preflight[lease]" not in proc2.stdout


def test_a_watch_re_attached_20_s_after_the_controller_was_killed_finishes_the_run(standin_cluster, tmp_path):
    """SIGKILL to ansible-playbook once the ranks train; 20 s later `aorta.cluster.watch` with the run's
    id, from a new process, re-attaches to what every node kept at launch and finishes the run as the
    original play would: run.json COMPLETED (its start the original's), every node collected."""
    run_id = "reattach-" + uuid.uuid4().hex[:6]
    # About a second a step: the run outlives the kill and the 20 s, then ends by itself.
    training = {"training.max_steps": 40, "standin.compute_ms": 800}
    launched = time.time()
    proc, results, out = standin_cluster.start(tmp_path, run_id, aorta_training_overrides=training)
    try:
        standin_cluster.wait_until_training(range(len(standin_cluster.nodes)), run_id, proc, out)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (results / "run.json").exists()
    time.sleep(20)
    before = min(
        min(standin_cluster.node_status(i, run_id)["progress"].values()) for i in range(len(standin_cluster.nodes))
    )
    assert before < 40, "the run ended before the watch re-attached: nothing left to prove"
    watched = standin_cluster.collection_playbook(
        "aorta.cluster.watch",
        {"aorta_run_id": run_id, "aorta_results_dir": str(results), "aorta_training_overrides": training},
    )
    (tmp_path / "watch.log").write_text(watched.stdout + watched.stderr)
    assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr[-2000:]
    run = json.loads((results / "run.json").read_text())
    assert run["status"] == "COMPLETED" and run["run_id"] == run_id, run["message"]
    assert run["started_epoch"] <= launched + 10, (run["started_epoch"], launched)  # the run's start, not the watch's
    assert run["verdict"]["verdict"] == "PASS", run["verdict"]
    assert [n["state"] for n in run["nodes"]] == ["ok"] * len(standin_cluster.nodes), run["nodes"]
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    assert all(n["collected"] for n in manifest["nodes"]) and not manifest["missing_ranks"], manifest["nodes"]
    assert standin_cluster.containers_of(run_id) == []
    # A wrong id is refused on the head, naming it, and nothing is touched.
    wrong = standin_cluster.collection_playbook(
        "aorta.cluster.watch", {"aorta_run_id": "no-such-run", "aorta_results_dir": str(tmp_path / "wrong")}
    )
    assert wrong.returncode != 0 and "no run no-such-run was launched on" in wrong.stdout, wrong.stdout[-3000:]
    # A stop of the finished run says so, stops nothing, and is added to its run.json.
    again = standin_cluster.collection_playbook(
        "aorta.cluster.stop", {"aorta_run_id": run_id, "aorta_results_dir": str(results)}
    )
    assert again.returncode == 0 and f"run {run_id} already ended on " in again.stdout, again.stdout[-3000:]
    stops = json.loads((results / "run.json").read_text())["stops"]
    assert len(stops) == 1 and stops[0]["finished"] == len(standin_cluster.nodes) and not stops[0]["asked_head"]
    # A second watch of the ended, recorded run is refused in one line naming its status, and its
    # record is byte-identical after (run.json, console.log, junit.xml, variables.json, the report...).
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    rewatched = standin_cluster.collection_playbook(
        "aorta.cluster.watch",
        {"aorta_run_id": run_id, "aorta_results_dir": str(results), "aorta_training_overrides": training},
    )
    assert rewatched.returncode != 0, rewatched.stdout[-3000:]
    said = [
        line
        for line in rewatched.stdout.splitlines()
        if line.startswith("fatal: ") and f"watch: run {run_id} has ended and is recorded" in line
    ]
    assert len(said) == 1 and "(COMPLETED: " in said[0] and "aorta.cluster.trace_collect" in said[0], said
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before


def test_the_stop_playbook_has_the_head_stop_a_run_whose_controller_was_killed(standin_cluster, tmp_path):
    """A run left by a SIGKILLed controller, stopped by id from a new process: the head is asked, every
    supervisor records who stopped it, nothing is left, and the line says so (no run.json here)."""
    run_id = "stopped-" + uuid.uuid4().hex[:6]
    proc, results, out = standin_cluster.start(
        tmp_path, run_id, aorta_kill_grace_seconds=5, aorta_training_overrides={"training.max_steps": 1000000}
    )
    try:
        standin_cluster.wait_until_training(range(len(standin_cluster.nodes)), run_id, proc, out)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stopped = standin_cluster.collection_playbook(
        "aorta.cluster.stop", {"aorta_run_id": run_id, "aorta_results_dir": str(results)}
    )
    assert stopped.returncode == 0, stopped.stdout[-3000:] + stopped.stderr[-2000:]
    nodes = len(standin_cluster.nodes)
    line = f"stop {run_id}: asked its head to stop every node; {nodes} of {nodes} nodes' supervisors finished"
    assert f"{line}; no run.json of it here" in stopped.stdout, stopped.stdout[-3000:]
    assert standin_cluster.containers_of(run_id) == [] and standin_cluster.workload_processes() == []
    for index in range(nodes):
        status = standin_cluster.node_status(index, run_id)
        assert status["finished"] and "stopped by aorta.cluster.stop from " in status["reason"], status["reason"]


def test_two_runs_started_together_exactly_one_launches(standin_cluster, tmp_path):
    ids = ["twin-a-" + uuid.uuid4().hex[:4], "twin-b-" + uuid.uuid4().hex[:4]]
    procs = [standin_cluster.start(tmp_path, rid, aorta_collect_traces=False) for rid in ids]
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


def release_node(standin_cluster, node, run_id):
    standin.restart_node(node["container"], node["mgmt_ip"])
    released = standin_cluster.ansible(
        node["mgmt_ip"], "-m", "aorta.cluster.node_lease", "-a", f"state=released run_id={run_id}"
    )
    assert released.returncode == 0, released.stdout + released.stderr
    # The killed run's container, if the restarted node's dockerd kept it, goes too.
    index = standin_cluster.nodes.index(node)
    for container in standin_cluster.containers_of(run_id, [index]):
        standin_cluster.node_exec(index, "docker", "rm", "-f", container)


def kill_node_mid_run(standin_cluster, tmp_path, index, fault_table, label):
    """Kill stand-in node ``index`` (its container: sshd, dockerd, the supervisor, the ranks) once
    every rank trains, under a 900 s deadline that must not be what ends the run; restart it after."""
    victim = standin_cluster.nodes[index]
    run_id = "node-death-" + uuid.uuid4().hex[:6]
    proc, results, ended_after = standin_cluster.run_with_fault(
        tmp_path,
        run_id,
        lambda: subprocess.run(["docker", "kill", victim["container"]], check=True, capture_output=True),
        deadline=900,
        grace=10,
        wait_for=[i for i in range(len(standin_cluster.nodes)) if i != index] + [index],
        # Back (dockerd and sshd answer) before the test ends, its lease and container of this run
        # released: the next test on this worker's cluster, whichever it is, gets the node as it
        # was (seen: a later run took the lease over and said so on a line naming the node).
        restore=lambda: release_node(standin_cluster, victim, run_id),
    )
    run = json.loads((results / "run.json").read_text())
    survivors = [i for i in range(len(standin_cluster.nodes)) if i != index]
    left = [c for i in survivors for c in standin_cluster.containers_of(run_id, [i])]
    fault_table.append(
        {
            "fault": f"{label} container killed mid-run (3 nodes, 900 s deadline)",
            "expected": f"FAILED, first {victim['mgmt_ip']}, within 90 s, others collected",
            "got": f"{run['status']}, first {run['first_failure']}",
            "seconds": f"{ended_after:.0f} after the kill",
            "left on nodes": len(left),
        }
    )
    return proc, run, results, victim, left, ended_after


def test_the_head_stops_the_run_within_90_s_when_a_workers_node_dies(standin_cluster, tmp_path, fault_table):
    """The head hears nothing from the node for aorta_heartbeat_timeout (30 s) and stops every node."""
    index = len(standin_cluster.nodes) - 1
    proc, run, results, victim, left, ended_after = kill_node_mid_run(
        standin_cluster, tmp_path, index, fault_table, "worker node"
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED" and run["first_failure"] == victim["mgmt_ip"], run["message"]
    assert ended_after < 90, ended_after
    assert f"no heartbeat from {victim['mgmt_ip']}" in run["message"], run["message"]
    states = {n["name"]: n["state"] for n in run["nodes"]}
    assert states[victim["mgmt_ip"]] == "unreachable"
    assert "setup stopped" not in run["message"]
    # The collection and the report still ran for the others; the dead node is recorded, not fatal.
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    collected = {n["name"]: n["collected"] for n in manifest["nodes"]}
    assert collected.pop(victim["mgmt_ip"]) is False and all(collected.values()), manifest["nodes"]
    assert (results / "aorta_benchmark_report.json").exists()
    assert left == []


def test_the_workers_stop_the_run_within_90_s_when_the_heads_node_dies(standin_cluster, tmp_path, fault_table):
    """Last in this file: with the head gone, every worker stops itself once the head has been
    silent for aorta_heartbeat_timeout; the run names the head."""
    proc, run, results, victim, left, ended_after = kill_node_mid_run(
        standin_cluster, tmp_path, 0, fault_table, "head node"
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED" and run["first_failure"] == victim["mgmt_ip"], run["message"]
    assert ended_after < 90, ended_after
    states = {n["name"]: n["state"] for n in run["nodes"]}
    assert states[victim["mgmt_ip"]] == "unreachable"
    assert left == [] and standin_cluster.workload_processes() == []
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    collected = {n["name"]: n["collected"] for n in manifest["nodes"]}
    assert collected.pop(victim["mgmt_ip"]) is False and all(collected.values()), manifest["nodes"]
