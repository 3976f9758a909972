# SPDX-License-Identifier: GPL-3.0-or-later
"""The fault matrix on the stand-in cluster: what a large cluster meets every day.

Each case drives the real playbook over SSH against real nodes, injects its fault from outside
(as the network, the disk or the operator would), and asserts the run's status, the node it names,
a time bound and that nothing is left running. Each adds a row to the table `make faults` prints.
The node-death case lives at the end of test_supervision.py (it restarts a node container).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
import uuid

import pytest
from conftest import read_junit

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import LEASE_FILE
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import HEARTBEAT_S, stop_bound_s

pytestmark = pytest.mark.standin


def leftovers(cluster, run_id: str) -> list[str]:
    """This run's containers and any workload process still on any node."""
    return cluster.containers_of(run_id) + cluster.workload_processes()


def wait_for_nothing_left(cluster, run_id: str, seconds: float) -> list[str]:
    """The supervisors remove their containers as their last step: give them that long."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = leftovers(cluster, run_id)
        if not left:
            return []
        time.sleep(1)
    return leftovers(cluster, run_id)


def manifest_of(results):
    path = results / "combined_traces" / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def tree_is_whole(results, manifest) -> bool:
    """Every file the manifest lists for a collected node is there with its size and hash; no
    staging directory is left behind."""
    if (results / ".staging").exists():
        return False
    for node in manifest["nodes"]:
        if not node["collected"]:
            continue
        for entry in node["files"]:
            path = results / "combined_traces" / f"node_{node['rank']}" / entry["path"]
            if not path.is_file() or path.stat().st_size != entry["size"]:
                return False
            if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
                return False
    return True


@pytest.mark.xdist_group("healthy_series")
def test_ten_healthy_runs_in_a_row_all_complete_with_complete_manifests(standin_cluster, healthy_series, fault_table):
    """And none names a straggler: six profiled steps of 50 ms compute each, enough for the test to
    name one of 4 ranks at 5% (test_insight.py plants one). The runs are conftest's healthy_series,
    which test_insight takes as its healthy runs too (the last one's impossible threshold fails its
    verdict, not its run)."""
    outcomes, named = [], []
    for _proc, run, results, elapsed in healthy_series.runs:
        report_path = results / "aorta_benchmark_report.json"
        if report_path.exists():
            named += [s["rank"] for s in json.loads(report_path.read_text())["stragglers"]]
        manifest = manifest_of(results)
        complete = bool(
            manifest
            and not manifest["missing_ranks"]
            and not manifest["nodes_not_collected"]
            and all(n["collected"] for n in manifest["nodes"])
            and tree_is_whole(results, manifest)
        )
        outcomes.append((run["status"] if run else None, complete, round(elapsed, 1)))
    took = healthy_series.seconds
    good = sum(1 for status, complete, _seconds in outcomes if status == "COMPLETED" and complete)
    left = standin_cluster.containers_left()
    fault_table.append(
        {
            "fault": "none: 10 healthy runs in a row (2 nodes)",
            "expected": "10/10 COMPLETED, complete manifests, no straggler",
            "got": f"{good}/10, stragglers named {named or 'none'}",
            "seconds": f"{took:.0f} ({took / 10:.0f} per run)",
            "left on nodes": len(left),
        }
    )
    assert len(outcomes) == 10
    assert good == 10, outcomes
    assert named == [], named
    assert left == []


def test_a_node_whose_fabric_link_goes_down_mid_run_is_named_first(standin_cluster, tmp_path, fault_table):
    """Its SSH stays up; every rank waits at the same collective; the node's own check names it."""
    deadline, grace = 45, 5
    index = 1
    victim = standin_cluster.nodes[index]
    run_id = "fabric-cut-" + uuid.uuid4().hex[:6]
    link = ["ip", "link", "set", victim["fabric_if"]]
    _proc, results, ended_after = standin_cluster.run_with_fault(
        tmp_path,
        run_id,
        lambda: standin_cluster.node_exec(index, *link, "down"),
        deadline=deadline,
        grace=grace,
        restore=lambda: standin_cluster.node_exec(index, *link, "up"),
    )
    run = json.loads((results / "run.json").read_text())
    left = wait_for_nothing_left(standin_cluster, run_id, 30)
    fault_table.append(
        {
            "fault": f"fabric interface of node {index} down mid-run (3 nodes)",
            "expected": f"TIMEOUT or FAILED, first {victim['mgmt_ip']}",
            "got": f"{run['status']}, first {run['first_failure']}",
            "seconds": f"{ended_after:.0f} after the cut (deadline {deadline})",
            "left on nodes": len(left),
        }
    )
    assert run["status"] in ("TIMEOUT", "FAILED"), run["message"]
    assert run["first_failure"] == victim["mgmt_ip"], run["message"]
    assert f"fabric {victim['fabric_if']} down" in run["message"]
    assert victim["mgmt_ip"] in run["diagnosis"]["summary"]
    assert ended_after < deadline + grace + 120, ended_after
    assert left == []


def test_ssh_that_drops_during_one_nodes_pull_is_retried_or_recorded_and_leaves_no_half_tree(
    standin_cluster, tmp_path, fault_table
):
    """The node's SSH connections are reset for a few seconds once the pull starts."""
    index, hold = 1, 4
    victim = standin_cluster.nodes[index]
    run_id = "ssh-cut-" + uuid.uuid4().hex[:6]
    rule = ["INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with", "tcp-reset"]
    started = time.monotonic()
    proc, results, out = standin_cluster.start(tmp_path, run_id)
    cut_at = []
    # The node's files land here on the controller from the moment its pull starts: unpacked as
    # they stream in over ssh, or (another connection plugin) its archive.
    landing = [results / ".staging" / f"node_{index}" / name for name in ("tree", "traces.tar")]
    output = f"/root/aorta/aorta_runs/{run_id}"

    def cut_when_the_pull_starts():
        # A few MB of traces pack and pull in well under a second, faster than any poll of the node:
        # 64 MB of incompressible ballast in the node's output keeps its pull going for the cut.
        while (
            proc.poll() is None
            and not standin_cluster.node_exec(index, "sh", "-c", f"ls -d {output} 2>/dev/null", check=False).strip()
        ):
            time.sleep(0.2)
        standin_cluster.node_exec(
            index, "dd", "if=/dev/urandom", f"of={output}/ballast.bin", "bs=1M", "count=64", check=False
        )
        while proc.poll() is None:
            if any(path.exists() for path in landing):
                standin_cluster.node_exec(index, "iptables", "-I", *rule)
                cut_at.append(time.monotonic())
                time.sleep(hold)
                standin_cluster.node_exec(index, "iptables", "-D", *rule)
                return
            time.sleep(0.01)

    cutter = threading.Thread(target=cut_when_the_pull_starts)
    cutter.start()
    try:
        proc.wait(timeout=600)
    finally:
        cutter.join(timeout=hold + 5)
        standin_cluster.node_exec(index, "iptables", "-D", *rule, check=False)  # gone already, normally
    took = time.monotonic() - started
    run = json.loads((results / "run.json").read_text())
    manifest = manifest_of(results)
    node = next(n for n in manifest["nodes"] if n["name"] == victim["mgmt_ip"])
    left = wait_for_nothing_left(standin_cluster, run_id, 30)
    fault_table.append(
        {
            "fault": f"SSH of node {index} reset for {hold}s during its pull",
            "expected": "pull retried, or node recorded not collected; tree whole",
            "got": f"{run['status']}, collected {node['collected']} after {node['pull_attempts']} attempt(s)",
            "seconds": f"{took:.0f}",
            "left on nodes": len(left),
        }
    )
    assert cut_at, "the pull never started: " + out.read_text()[-3000:]
    assert (node["collected"] and node["pull_attempts"] > 1) or (not node["collected"] and node["error"]), node
    assert tree_is_whole(results, manifest)
    if node["collected"]:
        assert run["status"] == "COMPLETED" and not manifest["missing_ranks"], run["message"]
    else:
        assert victim["mgmt_ip"] in run["combined_traces"]["nodes_not_collected"]
    assert left == []


def test_a_node_whose_output_disk_fills_while_the_workload_writes_is_named_with_the_disk(
    standin_cluster, tmp_path, fault_table
):
    """A 100 KiB tmpfs under the node's output root: the profiler's trace does not fit."""
    index = 1
    victim = standin_cluster.nodes[index]
    run_id = "disk-full-" + uuid.uuid4().hex[:6]
    outputs = "/root/aorta/aorta_runs"  # the stand-in's aorta_path and the default output root
    standin_cluster.node_exec(index, "mkdir", "-p", outputs)
    standin_cluster.node_exec(index, "mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", outputs)
    try:
        started = time.monotonic()
        proc, run, _results, _elapsed = standin_cluster.run(tmp_path, aorta_run_id=run_id)
        took = time.monotonic() - started
    finally:
        standin_cluster.node_exec(index, "umount", outputs, check=False)
    left = wait_for_nothing_left(standin_cluster, run_id, 30)
    fault_table.append(
        {
            "fault": f"output disk of node {index} full while writing (100 KiB tmpfs)",
            "expected": f"FAILED, first {victim['mgmt_ip']}, disk named",
            "got": f"{run['status']}, first {run['first_failure']}",
            "seconds": f"{took:.0f}",
            "left on nodes": len(left),
        }
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED" and run["first_failure"] == victim["mgmt_ip"], run["message"]
    assert f"disk full: {outputs}/{run_id}" in run["message"]
    assert "disk full" in run["diagnosis"]["summary"]
    assert left == []


# A profiled window that ends early (steps 3 to 5) in a run that would train on past the stop.
EARLY_WINDOW = {"training.max_steps": 1000000, "profiling.wait": 1, "profiling.warmup": 1, "profiling.active": 3}


def wait_for_steps(cluster, run_id: str, steps: int, proc, out) -> None:
    """Until every rank of every node made ``steps`` steps (the profiled window is written)."""
    for _attempt in range(300):
        statuses = [cluster.node_status(i, run_id) for i in range(len(cluster.nodes))]
        if all(s and s["state"] == "running" and min(s["progress"].values() or [0]) >= steps for s in statuses):
            return
        assert proc.poll() is None, out.read_text()[-3000:]
        time.sleep(1)
    raise AssertionError("the ranks never got that far: " + out.read_text()[-3000:])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_mid_run_stops_every_node_records_stopped_and_keeps_the_traces(
    standin_cluster, tmp_path, fault_table, signum
):
    """SIGINT to ansible-playbook's process group, as a terminal's Ctrl-C sends it (SIGTERM, as a CI
    runner sends it): the run stops on every node within the stop bound, what the ranks wrote is
    collected, run.json says STOPPED with the reason, the phase and the steps, and the play exits
    non-zero. The nodes' own supervision of a controller that is gone (SIGKILL) is
    test_supervision.py's."""
    deadline, grace = 900, 10
    name = signal.Signals(signum).name
    run_id = f"{name.lower()}-" + uuid.uuid4().hex[:6]
    proc, results, out = standin_cluster.start(
        tmp_path,
        run_id,
        aorta_timeout_seconds=deadline,
        aorta_kill_grace_seconds=grace,
        aorta_training_overrides=EARLY_WINDOW,
    )
    try:
        wait_for_steps(standin_cluster, run_id, 7, proc, out)
        os.killpg(proc.pid, signum)
        interrupted = time.monotonic()
        gone_after = None  # when no workload nor container of the run was left on any node
        while proc.poll() is None and time.monotonic() - interrupted < 300:
            if gone_after is None and not leftovers(standin_cluster, run_id):
                gone_after = time.monotonic() - interrupted
            time.sleep(1)
        proc.wait(timeout=10)
        took = time.monotonic() - interrupted
        if gone_after is None and not leftovers(standin_cluster, run_id):
            gone_after = took
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    left = wait_for_nothing_left(standin_cluster, run_id, 5)
    run = json.loads((results / "run.json").read_text())
    text = out.read_text()
    fault_table.append(
        {
            "fault": f"{name} to ansible-playbook mid-run (deadline {deadline})",
            "expected": "STOPPED everywhere, traces kept, exit non-zero",
            "got": f"{run['status']} {run['stopped'] and run['stopped']['phase']}",
            "seconds": f"{took:.0f} from the signal to the playbook's end",
            "left on nodes": len(left),
        }
    )
    assert proc.returncode != 0, text[-3000:]
    assert run["status"] == "STOPPED", run["message"]
    stopped = run["stopped"]
    assert stopped["phase"] == "while training" and stopped["signal"] == name, stopped
    assert stopped["reason"].startswith("interrupted on the controller at ") and name in stopped["reason"]
    assert len(stopped["steps"]) == len(standin_cluster.nodes) and min(stopped["steps"].values()) >= 7, stopped
    assert run["verdict"]["verdict"] == "FAIL" and run["verdict"]["reasons"][0].startswith("STOPPED by the user")
    # junit.xml: every node's run skipped as stopped by the user; only the verdict fails.
    cases = read_junit(results)
    runs = [case for key, case in cases.items() if key.endswith(": run")]
    assert runs == [("skipped", "stopped by the user")] * len(standin_cluster.nodes), cases
    assert [key for key, (outcome, _m) in cases.items() if outcome == "failure"] == ["aorta.run: verdict"], cases
    assert text.count("interrupt again to leave now") == 1, text[-3000:]
    assert left == [] and standin_cluster.containers_left() == []
    # The head hears of it at the watch's next poll (aorta_poll_seconds), each worker at its next
    # report; then SIGTERM, the grace, SIGKILL, cleanup: the supervisors' own stop bound.
    bound = stop_bound_s(grace, 0) + 2 * HEARTBEAT_S + 15
    assert gone_after is not None and gone_after < bound, (gone_after, bound)
    # What every node's ranks wrote came back whole, and the report says what was profiled. Aorta
    # (and the stand-in) export a rank's trace after its loop: a rank that SIGTERM stops after its
    # step writes one; a rank left in a collective whose peer already stopped does not (its node is
    # told up to a heartbeat later), and the report names it missing.
    manifest = manifest_of(results)
    assert all(n["collected"] for n in manifest["nodes"]), manifest["nodes"]
    assert tree_is_whole(results, manifest)
    report = json.loads((results / "aorta_benchmark_report.json").read_text())
    assert report["missing_ranks"] == manifest["missing_ranks"], (report["missing_ranks"], manifest["missing_ranks"])
    # Every node's own status names the controller's stop.
    for index in range(len(standin_cluster.nodes)):
        status = standin_cluster.node_status(index, run_id)
        assert status["finished"] and "stopped from the controller" in status["reason"], status


def test_two_ctrl_c_leave_at_once_and_the_stop_playbook_then_frees_the_nodes(standin_cluster, tmp_path, fault_table):
    """Two SIGINTs a second apart: ansible-playbook leaves at once, printing the command that stops
    the run later; that command, from a second process, frees every node within the stop bound."""
    deadline, grace = 900, 10
    run_id = "twice-" + uuid.uuid4().hex[:6]
    proc, _results, out = standin_cluster.start(
        tmp_path,
        run_id,
        aorta_timeout_seconds=deadline,
        aorta_kill_grace_seconds=grace,
        aorta_training_overrides={"training.max_steps": 1000000},
    )
    try:
        standin_cluster.wait_until_training(range(len(standin_cluster.nodes)), run_id, proc, out)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(1)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = out.read_text()
    assert proc.returncode != 0
    command = f"ansible-playbook aorta.cluster.stop -i <your cluster file> -e aorta_run_id={run_id}"
    assert f"leaving now; to stop the run later: {command}" in text, text[-3000:]
    started = time.monotonic()
    stopped = standin_cluster.collection_playbook("playbooks/stop.yml", {"aorta_run_id": run_id})
    left = wait_for_nothing_left(standin_cluster, run_id, stop_bound_s(grace, 0))
    took = time.monotonic() - started
    fault_table.append(
        {
            "fault": "two SIGINTs a second apart, then the stop playbook",
            "expected": "leaves at once; stop frees every node",
            "got": f"stop rc {stopped.returncode}",
            "seconds": f"{took:.0f} from the stop playbook's start to nothing left",
            "left on nodes": len(left),
        }
    )
    assert stopped.returncode == 0, stopped.stdout[-3000:] + stopped.stderr[-2000:]
    assert left == [] and standin_cluster.containers_left() == []
    for index in range(len(standin_cluster.nodes)):  # each node's lease is free for the next run
        lease = standin_cluster.node_exec(index, "cat", f"/var/tmp/aorta-cluster/{LEASE_FILE}", check=False)
        assert run_id not in lease, lease
    # The same id again: the run has ended; the stop says so, once, and exits 0 (nothing to stop).
    again = standin_cluster.collection_playbook("playbooks/stop.yml", {"aorta_run_id": run_id})
    assert again.returncode == 0 and again.stdout.count(f"run {run_id} already ended on ") == 1, again.stdout[-3000:]
    # An id no run of this cluster had is refused on the head, in one line, and stops nothing.
    wrong = standin_cluster.collection_playbook("playbooks/stop.yml", {"aorta_run_id": "no-such-run"})
    assert wrong.returncode != 0 and "no run no-such-run on " in wrong.stdout, wrong.stdout[-3000:]
