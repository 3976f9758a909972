# SPDX-License-Identifier: GPL-3.0-or-later
"""Node health on 4 stand-in nodes, through the STAND-IN GPU tool's knobs: n1 with a process
already holding a GPU, n2 whose GPU tool hangs, n3 with another amdgpu driver. Preflight names n1
and n2, one line each, within the step timeout + 10 s, warns about n3's drift (driver and fabric MTU), launches nothing;
healthy.cluster.json then runs cleanly on n0 and n3 as ranks 0 and 1."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import pytest
import standin
from conftest import REPO, read_json, read_junit

pytestmark = pytest.mark.standin

STEP_TIMEOUT = 5
TASK_LOG_ENV = {
    "ANSIBLE_CALLBACKS_ENABLED": "aorta_task_log",
    "ANSIBLE_CALLBACK_PLUGINS": str(REPO / "benchmarks" / "callback_plugins"),
}


@pytest.fixture(scope="module")
def four_nodes(standin_cluster, tmp_path_factory):
    """The session's three nodes and a fourth, in one cluster file; knobs turned back at the end."""
    extra = standin.add_node(3)
    nodes = [*standin_cluster.nodes[:3], extra]
    data = json.loads(standin_cluster.cluster_json.read_text())
    first = list(data["node_dict"].items())[:3]
    data["node_dict"] = dict(first)
    data["node_dict"][extra["mgmt_ip"]] = {"bmc_ip": "NA", "vpc_ip": extra["vpc_ip"]}
    path = tmp_path_factory.mktemp("health") / "cluster.json"
    path.write_text(json.dumps(data))
    try:
        yield path, nodes
    finally:
        for node in standin_cluster.nodes:
            standin.gpu_knobs(node["container"], {})
        for node in nodes[:2]:
            subprocess.run(["docker", "exec", node["container"], "pkill", "-f", "leaked-gpu-holder"], check=False)
        standin.remove_node(3)


def leak_a_process(container: str) -> int:
    """A real process on the node, so that the probe names its user from /proc (the stand-in tool
    lists it as holding GPU 0)."""
    subprocess.run(
        ["docker", "exec", "-d", container, "python3", "-c", "import time; time.sleep(900)", "leaked-gpu-holder"],
        check=True,
    )
    for _attempt in range(50):
        out = subprocess.run(
            ["docker", "exec", container, "pgrep", "-n", "-f", "leaked-gpu-holder"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if out:
            return int(out)
        time.sleep(0.1)
    raise AssertionError("the leaked process did not start")


def set_fabric_mtu(node: dict, mtu: int) -> None:
    """The MTU of the node's interface that holds its vpc_ip (the fourth node goes with the fixture)."""
    shown = subprocess.run(
        ["docker", "exec", node["container"], "ip", "-o", "-4", "address", "show"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    name = next(line.split()[1] for line in shown.splitlines() if f" {node['vpc_ip']}/" in line)
    subprocess.run(["docker", "exec", node["container"], "ip", "link", "set", name, "mtu", str(mtu)], check=True)


def n1_leaks_n2_hangs_n3_drifts(nodes: list) -> int:
    """n1 with a leaked GPU process, n2 whose GPU tool hangs, n3 with another driver and its fabric
    link at another MTU; the leaked pid."""
    pid = leak_a_process(nodes[1]["container"])
    standin.gpu_knobs(nodes[1]["container"], {"processes": [{"pid": pid, "name": "python3"}]})
    standin.gpu_knobs(nodes[2]["container"], {"delay_s": 3600})
    standin.gpu_knobs(nodes[3]["container"], {"driver": "6.7.0"})
    set_fabric_mtu(nodes[3], 1400)
    return pid


def run_logged(cluster, tmp_path, inventory, run_id, **extra):
    task_log = tmp_path / f"{run_id}.tasks.jsonl"
    proc, results, out = cluster.start(
        tmp_path,
        run_id,
        inventory=inventory,
        environment=dict(TASK_LOG_ENV, AORTA_TASK_LOG=str(task_log)),
        **extra,
    )
    proc.wait(timeout=900)
    tasks = [json.loads(line) for line in task_log.read_text().splitlines()] if task_log.exists() else []
    return proc, results, out.read_text(), tasks


def test_unhealthy_nodes_are_named_nothing_launches_and_the_healthy_ones_rerun(standin_cluster, four_nodes, tmp_path):
    inventory, nodes = four_nodes
    names = [n["mgmt_ip"] for n in nodes]
    pid = n1_leaks_n2_hangs_n3_drifts(nodes)

    proc, results, output, tasks = run_logged(
        standin_cluster, tmp_path, inventory, "health-stop", aorta_health_step_timeout=STEP_TIMEOUT
    )
    assert proc.returncode != 0, output[-3000:]

    # One line each for n1 and n2, with the reason; nothing about n0 or n3 failing.
    leaked = [line for line in output.splitlines() if f"preflight[health]: {names[1]}:" in line]
    hung = [line for line in output.splitlines() if f"preflight[health]: {names[2]}:" in line]
    assert leaked and f"pid {pid} python3 (user root)" in leaked[0], output[-3000:]
    assert hung and f"amd-smi list gave no answer within {STEP_TIMEOUT} s" in hung[0], output[-3000:]
    assert f"preflight[health]: {names[0]}" not in output and f"preflight[health]: {names[3]}" not in output
    # Of the 3 nodes that could say (n2's tool hung before it was asked).
    assert f"preflight[drift]: WARNING amdgpu driver: 1 of 3 nodes differ from 6.8.5: {names[3]} (6.7.0)" in output
    # The link's MTU is read without the GPU tool: every node says it, n2 too.
    assert f"preflight[drift]: WARNING fabric MTU: 1 of 4 nodes differ from 1500: {names[3]} (1400)" in output

    # Within the step timeout + 10 s: the probe of every node, the head's first.
    prepare = [t for t in tasks if t["action"] == "aorta.cluster.node_prepare"]
    assert len(prepare) == 4, tasks
    took = max(t["end"] for t in prepare) - min(t["start"] for t in prepare)
    assert took < STEP_TIMEOUT + 10, f"preflight took {took:.1f} s"

    run = read_json(results / "run.json")
    assert run["status"] == "FAILED" and set(run["failed_nodes"]) == {names[1], names[2]}
    assert [u["name"] for u in run["unhealthy"]] == [names[1], names[2]]
    assert [d["field"] for d in run["drift"]] == ["amdgpu", "link_mtu"]
    row3 = next(n for n in run["nodes"] if n["name"] == names[3])
    assert row3["fingerprint"]["amdgpu"] == "6.7.0" and row3["health"]["tool"] == "amd-smi"
    assert row3["fingerprint"]["link_mtu"] == 1400
    text = (results / "unhealthy.txt").read_text()
    assert sorted({line.split("\t")[0] for line in text.splitlines()}) == sorted([names[1], names[2]])
    # A setup failure still gets its junit.xml (each unhealthy node's health fails with its reason,
    # nothing launched is skipped) and its row in the results root's history.
    cases = read_junit(results)
    assert cases[f"aorta.{names[1]}: rank 1 {names[1]}: health"][0] == "failure"
    assert f"pid {pid}" in cases[f"aorta.{names[1]}: rank 1 {names[1]}: health"][1]
    assert cases[f"aorta.{names[2]}: rank 2 {names[2]}: health"][0] == "failure"
    assert cases[f"aorta.{names[0]}: rank 0 {names[0]}: health"][0] == ""
    assert {cases[f"aorta.{names[3]}: rank 3 {names[3]}: {stage}"][0] for stage in ("launch", "run")} == {"skipped"}
    history = read_json(results.parent / "index.json")["runs"]
    assert [(row["dir"], row["status"]) for row in history if row["dir"] == results.name] == [(results.name, "FAILED")]
    # Recorded and judged once, by the rescue: its last task fails every node, which ends the playbook.
    once = [t["action"] for t in tasks if t["action"] in ("aorta.cluster.run_record", "aorta.cluster.run_outcome")]
    assert once == ["aorta.cluster.run_record", "aorta.cluster.run_outcome"], once

    healthy = results / "healthy.cluster.json"
    assert stat.S_IMODE(os.stat(healthy).st_mode) == 0o600
    assert list(json.loads(healthy.read_text())["node_dict"]) == [names[0], names[3]]

    # Nothing launched anywhere, and every lease let go.
    for index in range(4):
        out = subprocess.run(
            [
                "docker",
                "exec",
                nodes[index]["container"],
                "docker",
                "ps",
                "-aq",
                "--filter",
                "label=aorta.cluster.run=health-stop",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.strip() == "", f"node {index} has a container of the run"

    # The file the run wrote starts the next run on the healthy nodes, ranks in cluster-file order.
    # n3's drift (driver, MTU) is a finding that fails the verdict by default; kept a note here.
    proc, run, results, _seconds = standin_cluster.run(tmp_path, inventory=healthy, aorta_verdict_ignores=["drift"])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED"
    verdict = read_json(results / "run.json")["verdict"]
    assert verdict["verdict"] == "PASS" and verdict["ignored"] == ["drift"], verdict
    assert [(n["name"], n["rank"]) for n in run["nodes"]] == [(names[0], 0), (names[3], 1)]
    assert run["context"]["launch_mode"] == "torchrun"
    assert f"amdgpu driver: 2 of 2 nodes differ, no majority: {names[0]} (6.8.5), {names[3]} (6.7.0)" in proc.stdout
    assert (results / "unhealthy.txt").read_text() == ""


def test_with_aorta_exclude_unhealthy_the_run_completes_on_the_healthy_nodes(standin_cluster, four_nodes, tmp_path):
    inventory, nodes = four_nodes
    names = [n["mgmt_ip"] for n in nodes]
    n1_leaks_n2_hangs_n3_drifts(nodes)

    proc, run, results, _seconds = standin_cluster.run(
        tmp_path, inventory=inventory, aorta_exclude_unhealthy=True, aorta_health_step_timeout=STEP_TIMEOUT
    )
    assert run["status"] == "COMPLETED", run["message"]
    # The two nodes it ran on differ in driver and MTU: drift, a finding, fails the verdict and the
    # exit though the run completed.
    verdict = read_json(results / "run.json")["verdict"]
    assert proc.returncode != 0 and verdict["findings"] == ["drift"], verdict
    assert verdict["reasons"][0].startswith("drift: amdgpu driver: "), verdict
    assert run["message"].endswith(f"; 2 excluded by preflight: {names[1]}, {names[2]}")
    assert run["context"]["launch_mode"] == "torchrun" and run["context"]["nodes"] == 2
    ranks = {n["name"]: (n["rank"], n["state"]) for n in run["nodes"]}
    assert ranks == {
        names[0]: (0, "ok"),
        names[1]: (None, "excluded"),
        names[2]: (None, "excluded"),
        names[3]: (1, "ok"),
    }
    assert [e["name"] for e in run["excluded"]] == [names[1], names[2]]
    assert "already hold a GPU" in run["excluded"][0]["reasons"][0]
    # What the run went on without is unhealthy, and every file says so alike.
    assert [u["name"] for u in run["unhealthy"]] == [names[1], names[2]]
    listed = {line.split("\t")[0] for line in (results / "unhealthy.txt").read_text().splitlines()}
    assert listed == {names[1], names[2]}
    assert list(json.loads((results / "healthy.cluster.json").read_text())["node_dict"]) == [names[0], names[3]]
    assert run["combined_traces"]["missing_ranks"] == [] and run["combined_traces"]["files"] >= 4
    # The excluded nodes ran nothing and let go of their lease.
    for index in (1, 2):
        assert standin_cluster.containers_of(run["run_id"], [index]) == []
        lease = standin_cluster.node_exec(index, "ls", standin_cluster.status_dir, check=False)
        assert "node.lease" not in lease.split(), f"node {index} still holds its lease"
    report = (results / "report.html").read_text()
    assert "id='run-excluded'" in report and names[1] in report


def test_an_unhealthy_head_hands_over_to_the_first_node_that_passes(standin_cluster, four_nodes, tmp_path):
    inventory, nodes = four_nodes
    names = [n["mgmt_ip"] for n in nodes]
    pid = leak_a_process(nodes[0]["container"])
    standin.gpu_knobs(nodes[0]["container"], {"processes": [{"pid": pid, "name": "python3"}]})
    standin.gpu_knobs(nodes[1]["container"], {"ecc_uncorrectable": 2})
    standin.gpu_knobs(nodes[2]["container"], {})
    standin.gpu_knobs(nodes[3]["container"], {})

    # The fixture's n3 keeps its fabric MTU of 1400: drift, a finding, kept a note here.
    proc, run, _results, _seconds = standin_cluster.run(
        tmp_path, inventory=inventory, aorta_exclude_unhealthy=True, aorta_min_nodes=2, aorta_verdict_ignores=["drift"]
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"preflight: {names[2]} is the run's head (the head {names[0]} did not pass preflight)" in proc.stdout
    assert run["status"] == "COMPLETED", run["message"]
    # Ranks renumbered in cluster-file order; the mode stays torchrun (the cluster has 4 nodes).
    ranks = {n["name"]: n["rank"] for n in run["nodes"]}
    assert ranks == {names[0]: None, names[1]: None, names[2]: 0, names[3]: 1}
    assert run["master_addr"] == nodes[2]["vpc_ip"] and run["context"]["launch_mode"] == "torchrun"
    assert [e["name"] for e in run["excluded"]] == [names[0], names[1]]
