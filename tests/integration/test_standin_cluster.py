# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in cluster itself: real SSH, a dockerd per node, isolated management networks,
and the stand-in workload rendezvousing across nodes on the fabric addresses."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import standin
from conftest import REPO

pytestmark = pytest.mark.standin


def test_every_node_answers_ping_over_ssh_and_runs_its_own_dockerd(standin_cluster):
    ping = standin_cluster.ansible("aorta_nodes", "-m", "ansible.builtin.ping")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == len(standin_cluster.nodes)
    info = standin_cluster.ansible("aorta_nodes", "-m", "ansible.builtin.command", "-a", "docker info -f json")
    assert info.returncode == 0, info.stdout + info.stderr
    assert info.stdout.count("CHANGED") == len(standin_cluster.nodes)
    ids = {
        json.loads(standin_cluster.node_exec(i, "docker", "info", "-f", "{{json .ID}}"))
        for i in range(len(standin_cluster.nodes))
    }
    assert len(ids) == len(standin_cluster.nodes)  # one daemon per node, not a shared one


def test_fabric_addresses_differ_from_ssh_addresses(standin_cluster):
    cluster = json.loads(standin_cluster.cluster_json.read_text())
    for key, entry in cluster["node_dict"].items():
        assert entry["vpc_ip"] != key


def test_host_keys_are_checked(standin_cluster):
    known_hosts = (standin_cluster.cluster_json.parent / "known_hosts").read_text()
    for node in standin_cluster.nodes:
        assert node["mgmt_ip"] in known_hosts
    assert "StrictHostKeyChecking=yes" in standin_cluster.vars_yml.read_text()


def test_nodes_reach_each_other_only_over_the_fabric(standin_cluster):
    if len(standin_cluster.nodes) < 2:
        pytest.skip("needs two nodes")
    head = standin_cluster.nodes[0]
    probe = 'timeout 3 bash -c "echo > /dev/tcp/{}/22" && echo open || echo closed'
    assert standin_cluster.node_exec(1, "bash", "-c", probe.format(head["vpc_ip"])).strip() == "open"
    assert standin_cluster.node_exec(1, "bash", "-c", probe.format(head["mgmt_ip"])).strip() == "closed"


def test_workload_by_hand_writes_one_trace_per_global_rank(standin_cluster):
    nodes = standin_cluster.nodes
    image = standin_cluster.state["WORKLOAD_IMAGE"]
    nproc = 2
    out = "artifacts/by-hand"
    port = random.randrange(29400, 29500)  # a port no earlier test's rendezvous used
    for i in range(len(nodes)):
        standin_cluster.node_exec(i, "rm", "-rf", f"/root/aorta/{out}")
        standin_cluster.node_exec(i, "docker", "rm", "-f", "by-hand", check=False)
        standin_cluster.node_exec(
            i,
            "docker",
            "run",
            "-d",
            "--name",
            "by-hand",
            "--network",
            "host",
            "-v",
            "/root/aorta:/mnt",
            "-w",
            "/mnt",
            image,
            "sleep",
            "infinity",
        )
    procs = [
        subprocess.Popen(
            [
                "docker",
                "exec",
                node["container"],
                "docker",
                "exec",
                "-e",
                f"GLOO_SOCKET_IFNAME={node['fabric_if']}",
                "by-hand",
                "torchrun",
                f"--nnodes={len(nodes)}",
                f"--node_rank={i}",
                f"--nproc_per_node={nproc}",
                f"--master_addr={nodes[0]['vpc_ip']}",
                f"--master_port={port}",
                "train.py",
                "--config",
                "config/standin.yaml",
                "--override",
                f"training.output_dir={out}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, node in enumerate(nodes)
    ]
    try:
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for i in range(len(nodes)):
            standin_cluster.node_exec(i, "docker", "rm", "-f", "by-hand", check=False)
    assert all(p.returncode == 0 for p in procs), "\n----\n".join(o[-4000:] for o in outputs)
    world = len(nodes) * nproc
    seen = {}
    for i in range(len(nodes)):
        found = standin_cluster.node_exec(i, "find", f"/root/aorta/{out}/torch_profiler", "-name", "*.json")
        for path in found.split():
            info = json.loads(standin_cluster.node_exec(i, "cat", path))["distributedInfo"]
            assert info["world_size"] == world
            assert info["rank"] not in seen
            seen[info["rank"]] = path
    assert sorted(seen) == list(range(world))


def _instance_names(instance: str) -> dict:
    """What the stand-in module names for ``instance`` ('' the plain one), read by importing it as
    a user's `python3 tests/standin/standin.py` does."""
    code = (
        "import json, standin; print(json.dumps({'prefix': standin.PREFIX, 'fabric': standin.FABRIC, "
        "'label': standin.LABEL, 'out': str(standin.OUT), 'results': str(standin.RESULTS)}))"
    )
    env = dict(os.environ, AORTA_STANDIN_INSTANCE=instance, PYTHONPATH=str(REPO / "tests" / "standin"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_the_plain_instance_keeps_the_names_users_and_docs_know():
    plain = _instance_names("")
    assert plain["prefix"] == "aorta-standin" and plain["fabric"] == "aorta-standin-fabric"
    assert plain["label"] == "aorta.standin=1"
    assert plain["out"] == str(REPO / "build" / "standin") and plain["results"] == str(REPO / "build" / "results")


def _docker_names(kind: str, label: str) -> set[str]:
    """The names of the containers (``ps``) or networks (``network ls``) carrying ``label``."""
    argv = ["docker", "ps", "-a", "--format", "{{.Names}}"] if kind == "ps" else ["docker", "network", "ls"]
    if kind != "ps":
        argv += ["--format", "{{.Name}}"]
    out = subprocess.run([*argv, "--filter", f"label={label}"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_a_second_instance_shares_nothing_with_this_one_and_its_teardown_leaves_this_one_running(standin_cluster):
    """Two pytest-xdist workers' clusters side by side: another instance (one node) shares no
    container, network, label, path or address with this worker's, and taking it down leaves this
    one running and reachable over SSH."""
    other = f"iso{os.getpid()}"[:12]
    mine, theirs = _instance_names(standin.INSTANCE), _instance_names(other)
    env = dict(os.environ, AORTA_STANDIN_INSTANCE=other)
    script = [sys.executable, str(REPO / "tests" / "standin" / "standin.py")]
    up = subprocess.run([*script, "up", "--nodes", "1"], env=env, capture_output=True, text=True, check=False)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((Path(theirs["out"]) / "state.json").read_text())
        for key in ("prefix", "fabric", "label", "out", "results"):
            assert mine[key] != theirs[key], key
        assert not Path(theirs["out"]).is_relative_to(mine["out"]) and not Path(mine["out"]).is_relative_to(
            theirs["out"]
        )
        assert _docker_names("ps", mine["label"]).isdisjoint(_docker_names("ps", theirs["label"]))
        assert _docker_names("ps", theirs["label"]) == {n["container"] for n in state["nodes"]}
        assert _docker_names("network ls", mine["label"]).isdisjoint(_docker_names("network ls", theirs["label"]))
        addresses = {a for n in standin_cluster.nodes for a in (n["mgmt_ip"], n["vpc_ip"])}
        assert addresses.isdisjoint({a for n in state["nodes"] for a in (n["mgmt_ip"], n["vpc_ip"])})
        # No port on the host: each node's sshd listens on its own address, port 22.
        for node in [*standin_cluster.nodes, *state["nodes"]]:
            published = subprocess.run(
                ["docker", "port", node["container"]], capture_output=True, text=True, check=False
            )
            assert published.returncode == 0 and not published.stdout.strip(), published
        other_key = json.loads((Path(theirs["out"]) / "cluster.json").read_text())["priv_key_file"]
        assert other_key != json.loads(standin_cluster.cluster_json.read_text())["priv_key_file"]
    finally:
        down = subprocess.run([*script, "down"], env=env, capture_output=True, text=True, check=False)
    assert down.returncode == 0, down.stdout + down.stderr
    assert _docker_names("ps", theirs["label"]) == set() and not Path(theirs["out"]).exists()
    ping = standin_cluster.ansible("aorta_nodes", "-m", "ansible.builtin.ping")
    assert ping.returncode == 0 and ping.stdout.count("SUCCESS") == len(standin_cluster.nodes), ping.stdout
    assert _docker_names("ps", mine["label"]) == {n["container"] for n in standin_cluster.nodes}
