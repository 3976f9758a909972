# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in cluster itself: real SSH, a dockerd per node, isolated management networks,
and the stand-in workload rendezvousing across nodes on the fabric addresses."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

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
