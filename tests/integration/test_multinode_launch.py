# SPDX-License-Identifier: GPL-3.0-or-later
"""aorta_multinode.yml on the stand-in cluster: success, failure, unreachable, injection
(a timeout: test_hang_diagnosis.py).

Each test runs the real playbook over SSH against Docker-in-Docker nodes running real torchrun.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import NASTY

pytestmark = pytest.mark.standin

REPO = Path(__file__).resolve().parents[2]


def node_traces(cluster, run_id, planted=()):
    """Every trace of the run on the nodes, but for ``planted`` (an earlier run's, put there by the test)."""
    found = {}
    for i in range(len(cluster.nodes)):
        # Aorta's names: trace[_step<N>].json, or <host>_<pid>.<ns>.pt.trace.json with tensorboard on.
        out = cluster.node_exec(
            i, "find", f"/root/aorta/aorta_runs/{run_id}/torch_profiler", "-name", "*.json", check=False
        )
        for path in out.split():
            if path not in planted:
                found[path] = json.loads(cluster.node_exec(i, "cat", path))["distributedInfo"]
    return found


@pytest.mark.xdist_group("healthy_run")
def test_happy_path_completes_on_the_fabric_and_leaves_nothing(standin_cluster, healthy_run):
    nodes = standin_cluster.nodes
    proc, run, results = healthy_run.proc, healthy_run.run, healthy_run.results
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED"
    assert [n["state"] for n in run["nodes"]] == ["ok"] * len(nodes)
    # docs/results.md shows docs/samples/run.json as what a run writes: it must keep holding.
    sample = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
    assert set(run) == set(sample)
    assert set(run["nodes"][0]) == set(sample["nodes"][0])
    # The fabric sweep ran before the ranks over TCP (no RDMA device on a stand-in) and, healthy, named nobody.
    sweep = run["fabric_sweep"]
    assert sweep["ran"] and sweep["tool"] == "tcp" and sweep["localisable"] and sweep["slow"] == [], sweep
    assert sweep["unresolved"] == [] and sweep["not_measured"] == [], sweep
    # Rendezvous on the head's fabric address, with a port picked ON the head.
    assert run["master_addr"] == nodes[0]["vpc_ip"]
    head = nodes[0]["mgmt_ip"]
    # The port was picked on the head (binding its fabric address, which no other node holds) and
    # is the one the preflight line and every node's launch name.
    assert f"preflight: {len(nodes)} nodes ready; rendezvous {nodes[0]['vpc_ip']}:{run['master_port']};" in proc.stdout
    assert 29500 <= run["master_port"] <= 32767
    for node in run["nodes"]:
        assert node["fabric_if"] == "eth1"
        assert node["vpc_ip"] != node["mgmt_ip"]
    # Every trace knows the whole world: one rendezvous across all nodes.
    traces = node_traces(standin_cluster, run["run_id"], healthy_run.planted)
    world = 2 * len(nodes)
    assert sorted(info["rank"] for info in traces.values()) == list(range(world))
    assert all(info["world_size"] == world for info in traces.values())
    # The override value reached the workload byte for byte, and no shell ran it.
    head_log = (results / "logs" / f"{head}.log").read_text()
    assert json.dumps(f"standin.note={NASTY}") in head_log
    for i in range(len(nodes)):
        assert standin_cluster.node_exec(i, "find", "/root", "/tmp", "-name", "pwned*").strip() == ""
    assert standin_cluster.containers_left() == []
    # The console does not grow with the node count: the third node is named by its launch's
    # "changed" line and the recap, nothing else (no ok line, no per-node print). The run's one
    # progress line names whichever node holds the slowest rank at that poll (once it named the
    # third): it is the cluster's line, not a per-node one, so it is not counted.
    third = re.compile(re.escape(nodes[2]["mgmt_ip"]) + r"(?![\d.])")
    naming = [line for line in proc.stdout.splitlines() if third.search(line) and not line.startswith("running ")]
    assert len(naming) <= 2, naming


def test_failing_rank_fails_the_run_naming_its_node_and_keeps_every_log(standin_cluster, tmp_path):
    last = standin_cluster.nodes[-1]["mgmt_ip"]
    failing_rank = 2 * len(standin_cluster.nodes) - 1
    proc, run, results, _elapsed = standin_cluster.run(
        tmp_path, aorta_training_overrides={"standin.fail_rank": failing_rank}
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert run["first_failure"] == last
    assert last in run["message"] and f"rank {failing_rank} exit 1" in run["message"]
    # Why: the rank that raised first, its exception and frame (the others died of it).
    (behind,) = run["diagnosis"]["behind"]
    assert behind["rank"] == failing_rank and behind["node"] == last
    assert behind["exception"] == "RuntimeError"
    assert behind["message"] == f"stand-in fault: rank {failing_rank} fails after step 1"
    assert re.fullmatch(r"train\.py:\d+ in main", behind["frame"]), behind["frame"]
    for node in standin_cluster.nodes:
        assert (results / "logs" / f"{node['mgmt_ip']}.log").stat().st_size > 0
    assert standin_cluster.containers_left() == []


def test_unreachable_node_stops_the_run_before_anything_is_launched(standin_cluster, tmp_path):
    victim = standin_cluster.nodes[-1]
    subprocess.run(["docker", "pause", victim["container"]], check=True)
    try:
        proc, run, _results, _elapsed = standin_cluster.run(tmp_path, aorta_connect_timeout=10)
    finally:
        subprocess.run(["docker", "unpause", victim["container"]], check=True)
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert victim["mgmt_ip"] in run["message"]
    assert "preflight[ssh]: unreachable" in run["message"]
    assert "Launch on every node at once" not in proc.stdout
    assert standin_cluster.containers_left() == []


def test_every_unreachable_node_is_named_in_failed_nodes_and_no_reachable_one(standin_cluster, tmp_path):
    """The head's SSH hangs (paused) and a worker's name does not resolve: run.json's failed_nodes
    names both, in rank order, in one pass (a dead head does not hide a dead worker), and never the
    healthy worker, whose own checks passed."""
    victim = standin_cluster.nodes[0]
    data = json.loads(standin_cluster.cluster_file(tmp_path, 2).read_text())
    data["node_dict"]["unresolvable.invalid"] = {"vpc_ip": "192.0.2.201", "bmc_ip": "NA"}
    cluster = tmp_path / "three-cluster.json"
    cluster.write_text(json.dumps(data))
    subprocess.run(["docker", "pause", victim["container"]], check=True)
    try:
        proc, run, _results, _elapsed = standin_cluster.run(tmp_path, inventory=cluster, aorta_connect_timeout=10)
    finally:
        subprocess.run(["docker", "unpause", victim["container"]], check=True)
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert run["failed_nodes"] == [victim["mgmt_ip"], "unresolvable.invalid"]
    assert run["first_failure"] == victim["mgmt_ip"]
    assert "setup failed on 2 nodes" in run["message"]
    assert "Launch on every node at once" not in proc.stdout
    assert [u["name"] for u in run["unhealthy"]] == [victim["mgmt_ip"], "unresolvable.invalid"]
    assert f"unhealthy: 2 nodes: {victim['mgmt_ip']}, unresolvable.invalid, listed in " in proc.stdout
    assert standin_cluster.containers_left() == []


def test_with_aorta_exclude_unhealthy_a_dead_worker_is_left_out_without_a_connection(standin_cluster, tmp_path):
    """A worker whose SSH hangs (paused) under aorta_exclude_unhealthy: excluded by preflight like any
    unhealthy node, the launch never connects to it (no UNREACHABLE), the run completes on the rest,
    and run.json, unhealthy.txt and healthy.cluster.json agree on it."""
    victim = standin_cluster.nodes[-1]
    subprocess.run(["docker", "pause", victim["container"]], check=True)
    try:
        proc, run, results, _elapsed = standin_cluster.run(
            tmp_path, aorta_connect_timeout=5, aorta_exclude_unhealthy=True, aorta_collect_traces=False
        )
    finally:
        subprocess.run(["docker", "unpause", victim["container"]], check=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "UNREACHABLE!" not in proc.stdout
    assert run["status"] == "COMPLETED" and [e["name"] for e in run["excluded"]] == [victim["mgmt_ip"]]
    assert "preflight[ssh]: unreachable" in run["excluded"][0]["reasons"][0]
    assert [u["name"] for u in run["unhealthy"]] == [victim["mgmt_ip"]]
    assert (results / "unhealthy.txt").read_text().split("\t")[0] == victim["mgmt_ip"]
    healthy = json.loads((results / "healthy.cluster.json").read_text())["node_dict"]
    assert victim["mgmt_ip"] not in healthy and len(healthy) == len(standin_cluster.nodes) - 1
    assert f"-e aorta_cluster_file={results}/healthy.cluster.json" in proc.stdout
    assert standin_cluster.containers_left() == []


def test_a_hung_ssh_and_a_refused_one_stop_the_run_before_launch_within_90_s(standin_cluster, tmp_path):
    """Default aorta_connect_timeout: a paused node (its SSH hangs) and a loopback address nothing
    listens on (SSH refused: an answer): both named, nothing launched, and teardown does not wait on
    a node preflight never reached."""
    victim = standin_cluster.nodes[1]
    data = json.loads(standin_cluster.cluster_file(tmp_path, 2).read_text())
    data["node_dict"]["127.0.0.2"] = {"vpc_ip": "192.0.2.202", "bmc_ip": "NA"}
    cluster = tmp_path / "refused-cluster.json"
    cluster.write_text(json.dumps(data))
    subprocess.run(["docker", "pause", victim["container"]], check=True)
    try:
        proc, run, _results, elapsed = standin_cluster.run(tmp_path, inventory=cluster)
    finally:
        subprocess.run(["docker", "unpause", victim["container"]], check=True)
    assert proc.returncode != 0 and run["status"] == "FAILED"
    assert run["failed_nodes"] == [victim["mgmt_ip"], "127.0.0.2"], run["message"]
    assert elapsed < 90, elapsed
    assert "Launch on every node at once" not in proc.stdout
    assert standin_cluster.containers_left() == []


def test_container_that_cannot_write_stops_the_run_naming_its_node(standin_cluster, tmp_path):
    """What NFS root_squash does to the container's root, made with a read-only bind mount on one
    node: the run stops before launch, naming that node and the cause; nothing is left running."""
    victim = 1
    node = standin_cluster.nodes[victim]
    ro = "/root/aorta/readonly"
    standin_cluster.node_exec(
        victim, "sh", "-c", f"mkdir -p {ro} && mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"
    )
    try:
        proc, run, _results, _elapsed = standin_cluster.run(tmp_path, aorta_output_dir="readonly/run")
    finally:
        standin_cluster.node_exec(victim, "umount", ro)
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert run["failed_nodes"] == [node["mgmt_ip"]]
    assert "cannot write under /root/aorta" in run["message"] and "Read-only file system" in run["message"]
    assert "root_squash" in run["message"]
    assert {n["state"] for n in run["nodes"]} == {"not_started"}
    # No rank started anywhere: the other nodes' supervisors waited at the head for every node to
    # join (the container's check is part of each node's own launch step) and were stopped there.
    for i in range(len(standin_cluster.nodes)):
        out = standin_cluster.node_exec(i, "cat", f"/var/tmp/aorta-cluster/runs/{run['run_id']}.json", check=False)
        status = json.loads(out) if out.strip() else {}
        assert status.get("child_pid") is None, (i, status)
        assert "launched" not in [event["what"] for event in status.get("events", [])], (i, status)
    assert standin_cluster.containers_left() == []


def test_build_step_runs_in_each_container_and_a_failing_build_names_its_node(standin_cluster, tmp_path):
    """aorta_skip_rccl_build=false runs aorta_build_script inside every node's container before launch."""
    ok = "#!/bin/bash\necho built-in-container > /mnt/.build_marker\n"
    broken = "#!/bin/bash\necho 'hipcc: command not found' >&2\nexit 3\n"
    victim = 1
    for i in range(len(standin_cluster.nodes)):
        script = broken if i == victim else ok
        standin_cluster.node_exec(
            i,
            "sh",
            "-c",
            "mkdir -p /root/aorta/scripts && printf '%s' \"$1\" > /root/aorta/scripts/build_probe.sh",
            "w",
            script,
        )
    try:
        proc, run, _results, _elapsed = standin_cluster.run(
            tmp_path,
            aorta_skip_rccl_build=False,
            aorta_build_script="scripts/build_probe.sh",
            aorta_collect_traces=False,
        )
        markers = [
            standin_cluster.node_exec(i, "cat", "/root/aorta/.build_marker", check=False).strip()
            for i in range(len(standin_cluster.nodes))
        ]
    finally:
        for i in range(len(standin_cluster.nodes)):
            standin_cluster.node_exec(i, "rm", "-f", "/root/aorta/scripts/build_probe.sh", "/root/aorta/.build_marker")
    assert proc.returncode != 0
    assert run["status"] == "FAILED" and run["failed_nodes"] == [standin_cluster.nodes[victim]["mgmt_ip"]]
    assert "Build RCCL on the node" in run["message"]
    assert "(rc 3): hipcc: command not found" in run["message"]
    # It ran inside the containers (written through the /mnt bind mount), on every other node.
    assert [m for i, m in enumerate(markers) if i != victim] == ["built-in-container"] * (len(markers) - 1)
    assert {n["state"] for n in run["nodes"]} == {"not_started"}
    assert standin_cluster.containers_left() == []


def test_check_mode_shows_each_nodes_commands_and_launches_nothing(standin_cluster, tmp_path):
    proc = standin_cluster.playbook("--check", "-e", f"aorta_results_dir={tmp_path / 'check'}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    for rank, node in enumerate(standin_cluster.nodes):
        assert f'"node": "{node["mgmt_ip"]} (rank {rank}, torchrun)"' in proc.stdout
        assert f"--node_rank={rank}" in proc.stdout
    assert proc.stdout.count('"docker_run": "docker run -d --name aorta-benchmark-') == len(standin_cluster.nodes)
    assert proc.stdout.count('"GLOO_SOCKET_IFNAME": "eth1"') == len(standin_cluster.nodes)
    assert "--master_addr=" + standin_cluster.nodes[0]["vpc_ip"] in proc.stdout
    assert standin_cluster.containers_left() == []
    assert not (tmp_path / "check" / "run.json").exists()


def test_a_cvs_config_reaches_every_node_and_the_command_line_still_wins(standin_cluster, tmp_path):
    """-e aorta_cvs_config: CVS's own aorta_benchmark.yaml mapped once on the controller, its values on
    every node (an extra environment variable, a training override), and -e still wins over it."""
    cvs = tmp_path / "aorta_benchmark.yaml"
    cvs.write_text(
        "training_overrides:\n  training.max_steps: 7\n  training.log_interval: 3\n"
        "multi_node:\n  extra_env:\n    AORTA_CVS_MARK: from-cvs\n"
    )
    overrides = json.dumps({"aorta_training_overrides": {"training.max_steps": 9}})
    proc = standin_cluster.playbook(
        "--check", "-e", f"aorta_results_dir={tmp_path / 'check'}", "-e", f"aorta_cvs_config={cvs}", "-e", overrides
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    nodes = len(standin_cluster.nodes)
    assert proc.stdout.count('"AORTA_CVS_MARK": "from-cvs"') == nodes
    assert proc.stdout.count("training.max_steps=9") == nodes and "training.max_steps=7" not in proc.stdout
    assert "training.log_interval" not in proc.stdout  # the whole mapping lost to -e's, as any variable does
    assert standin_cluster.containers_left() == []


def test_node_without_the_image_loads_it_from_the_archive(standin_cluster, tmp_path):
    image = standin_cluster.state["WORKLOAD_IMAGE"]
    last = len(standin_cluster.nodes) - 1
    standin_cluster.node_exec(last, "docker", "rmi", "-f", image)
    proc, run, _results, _elapsed = standin_cluster.run(tmp_path, aorta_collect_traces=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED"
    # One line, for the node that lacked it only.
    assert proc.stdout.count(": loaded ") == 1
    assert f"{standin_cluster.nodes[last]['mgmt_ip']}: loaded {image} from " in proc.stdout
    assert image in standin_cluster.node_exec(last, "docker", "images", "--format", "{{.Repository}}:{{.Tag}}")
    assert "preflight[image]" not in proc.stdout


def test_an_image_that_is_nowhere_is_named_by_preflight_before_any_launch(standin_cluster, tmp_path):
    """A tag that is on no node and not in the archive: preflight names it with what the archive
    holds, nothing is copied or launched, every console line stays short; with every node excluded
    as unhealthy for that one reason, it is said once and no empty healthy.cluster.json is written."""
    missing = "rocm/pytorch:no-such-tag"
    proc, run, results, elapsed = standin_cluster.run(tmp_path, aorta_docker_image=missing)
    assert proc.returncode != 0 and run["status"] == "FAILED"
    # Every node checks itself at once: each names the image (before, only the head, the workers not probed).
    assert run["failed_nodes"] == [n["mgmt_ip"] for n in standin_cluster.nodes], run["failed_nodes"]
    # One reason on every node: said once, the node's name left out of it.
    said = f"preflight[image]: {missing} is not on the node and the archive "
    assert (
        run["message"].startswith("every node: ")
        and said in run["message"]
        and "does not hold it (it holds aorta-standin-workload:" in run["message"]
    )
    assert "Launch on every node at once" not in proc.stdout and elapsed < 90, elapsed
    assert standin_cluster.containers_left() == []
    for index in range(len(standin_cluster.nodes)):
        assert "workload-" not in standin_cluster.node_exec(index, "ls", "/tmp", check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("run ", "why: "))]
    assert lines and max(len(line) for line in lines) <= 300, lines

    # No archive: the probe's docker pull asks the registry (none is reachable here) and docker's
    # own error line names why, still before any launch.
    proc, run, _results, elapsed = standin_cluster.run(tmp_path, aorta_docker_image=missing, aorta_image_archive="")
    assert proc.returncode != 0 and run["status"] == "FAILED"
    pulled = f"preflight[image]: {missing} is not on the node and "  # every node's reason, said once
    assert (
        pulled + "cannot be pulled: Error" in run["message"] or pulled + "docker pull had no answer" in run["message"]
    )
    assert "Launch on every node at once" not in proc.stdout and elapsed < 150, elapsed

    proc, run, results, _elapsed = standin_cluster.run(
        tmp_path, aorta_docker_image=missing, aorta_exclude_unhealthy=True
    )
    assert proc.returncode != 0 and run["status"] == "FAILED"
    nodes = len(standin_cluster.nodes)
    assert not (results / "healthy.cluster.json").exists()
    assert f"unhealthy: all {nodes} nodes" in proc.stdout and "healthy.cluster.json" not in proc.stdout
    assert len((results / "unhealthy.txt").read_text().splitlines()) == nodes
