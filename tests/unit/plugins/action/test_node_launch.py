# SPDX-License-Identifier: GPL-3.0-or-later
"""node_launch in check mode over a two-node "cluster" of local hosts: each node's plan (rendezvous
on the head's address and the port the head picked, its own rank) printed once per node and
returned, and nothing started; a pull docker refuses fails the launch with docker's own line."""

from __future__ import annotations

import json
from types import SimpleNamespace

from test_node_prepare import PREPARE, head_without_its_checkout, leases, run_vars

from ansible_collections.aorta.cluster.plugins.action.node_launch import ActionModule

LAUNCH = {"name": "Launch", "aorta.cluster.node_launch": None, "register": "aorta_launch"}


def test_check_mode_shows_each_nodes_plan_and_starts_nothing(cluster_play, tmp_path):
    proc, out = cluster_play([PREPARE, LAUNCH], host_vars=leases(tmp_path), extra_vars=run_vars(tmp_path), check=True)
    port = out["aorta_prepare"]["localhost"]["port"]
    for rank, name in enumerate(["localhost", "127.0.0.1"]):
        launch = out["aorta_launch"][name]
        assert not launch.get("failed"), launch.get("msg")
        assert launch["master_addr"] == "127.0.0.1" and launch["master_port"] == port
        assert launch["launch_mode"] == "torchrun" and "job" not in launch and "started" not in launch
        row = launch["plan"]
        assert row["node"] == f"{name} (rank {rank}, torchrun)"
        assert f"--node_rank={rank}" in row["argv"] and row["rendezvous"] == f"127.0.0.1:{port}"
        assert row["docker_run"].startswith("docker run -d --name aorta-benchmark-prep-run ")
        assert json.dumps(row, indent=4).splitlines()[1] in proc.stdout  # printed, once per node
    assert proc.stdout.count('"docker_run": "docker run -d') == 2
    assert proc.stdout.count("preflight: 2 nodes ready; rendezvous 127.0.0.1:") == 1  # the head says it once


def test_an_excluded_head_launches_nothing_and_the_new_head_is_rank_0(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path, aorta_exclude_unhealthy=True)
    _proc, out = cluster_play([PREPARE, LAUNCH], host_vars=host_vars, extra_vars=settings, check=True)
    old, new = out["aorta_launch"]["localhost"], out["aorta_launch"]["127.0.0.1"]
    assert old["excluded"] and old["rank"] is None and "plan" not in old and old["head"] == "127.0.0.1"
    assert not new.get("failed"), new.get("msg")
    assert (new["rank"], new["head"], new["nnodes"]) == (0, "127.0.0.1", 1)
    # The cluster has two nodes: torchrun, not the one-node script mode.
    assert new["launch_mode"] == "torchrun" and "--nnodes=1" in new["plan"]["argv"]
    assert new["master_port"] == out["aorta_prepare"]["127.0.0.1"]["port"]
    assert [e["name"] for e in new["excluded_nodes"]] == ["localhost"]


def image_step(answers: dict) -> tuple[dict | None, list]:
    """node_launch's image step with each docker command answered from ``answers`` (by subcommand)."""
    task = SimpleNamespace(args={}, async_val=0, check_mode=False, action="aorta.cluster.node_launch")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = ActionModule(task, connection, SimpleNamespace(check_mode=False), None, None)
    sent: list = []

    def command(argv):
        sent.append(argv)
        return answers.get(argv[1], {"rc": 0})

    action._command = command
    settings = {"aorta_docker_image": "rocm/pytorch:no-such-tag", "aorta_image_archive": ""}
    return action._image(settings, {"facts": {}}, "n1"), sent


def test_a_failed_pull_fails_the_launch_with_dockers_own_line():
    error = "Error response from daemon: manifest for rocm/pytorch:no-such-tag not found: manifest unknown"
    step, sent = image_step({"pull": {"rc": 1, "stderr": f"Pulling...\n{error}\n"}})
    assert step == {"failed": True, "msg": f"n1: docker pull rocm/pytorch:no-such-tag failed: {error}"}
    assert [argv[1] for argv in sent] == ["pull"]  # nothing inspected after a pull docker refused
    ok, sent = image_step({})
    assert ok is None and [argv[1] for argv in sent] == ["pull", "image"]
