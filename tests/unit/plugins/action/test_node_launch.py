# SPDX-License-Identifier: GPL-3.0-or-later
"""node_launch in check mode over a two-node "cluster" of local hosts: each node's plan (rendezvous
on the head's address and the port the head picked, its own rank) printed once per node and
returned, and nothing started; a pull docker refuses fails the launch with docker's own line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_node_prepare import PREPARE, head_without_its_checkout, leases, run_vars

from ansible_collections.aorta.cluster.plugins.action.node_launch import ActionModule
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results

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


def failed_launch() -> dict:
    """A worker's launch as node_launch returned it when its container did not start: the node's plan
    (argv, environment, docker run line) and the supervisor's answer."""
    argv = ["torchrun", "--nnodes=2", "--nproc_per_node=8", "--node_rank=1", "--master_addr=192.168.20.1"]
    argv += ["--master_port=29517", "train.py", "--config", "config/distributed.yaml"]
    argv += [f"--override=training.option_{i}={i}" for i in range(12)]
    environment = {f"NCCL_SETTING_{i}": f"value-{i}" for i in range(10)} | {"GLOO_SOCKET_IFNAME": "ens51np0"}
    run = "docker run -d --name aorta-benchmark-20250612-101500-3f2a-1 --network host --ipc host " + " ".join(
        f"--device /dev/dri/renderD{128 + i}" for i in range(8)
    )
    said = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    return {
        "changed": False,
        "rank": 1,
        "head": "head-01",
        "nnodes": 2,
        "excluded_nodes": [],
        "plan": {"node": "gpu-node-07 (rank 1, torchrun)", "argv": argv, "environment": environment, "docker_run": run},
        "container": "aorta-benchmark-20250612-101500-3f2a-1",
        "launch_mode": "torchrun",
        "nproc": 8,
        "master_addr": "192.168.20.1",
        "master_port": 29517,
        "deadlines": {"wait_s": 7260, "run_s": 7200, "grace_s": 30},
        "failed": True,
        "msg": f"the container did not start: {said}",
        "stderr_lines": [said, "See 'docker run --help'."],
    }


def launch_action(check_mode: bool, returns: dict) -> ActionModule:
    task = SimpleNamespace(args={}, async_val=0, check_mode=check_mode, action="aorta.cluster.node_launch")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, None)
    action._templar = SimpleNamespace(template=lambda value: value)
    action._run = lambda tmp=None, task_vars=None: dict(returns)
    return action


def test_a_failed_launch_prints_one_short_line_and_run_record_reads_it_whole(tmp_path):
    full = failed_launch()
    assert len(_node_results.printed(full)) > 1000
    (tmp_path / "logs").mkdir()
    node_vars = {"inventory_hostname": "gpu-node-07", "aorta_results_dir_resolved": str(tmp_path)}
    short = launch_action(False, full).run(task_vars=node_vars)
    assert len(_node_results.printed(short)) < 300 and short["details"] == "logs/gpu-node-07.launch.json"
    assert "plan" not in short and short["msg"].startswith("the container did not start: docker: Error response")
    assert json.loads((tmp_path / "logs" / "gpu-node-07.launch.json").read_text()) == full
    # run_record's reading of the node (host_values): the launch whole, as before it was shortened.
    hostvars = {
        "head-01": {"aorta_launch": {"head": "head-01", "nproc": 8}},
        "gpu-node-07": {"aorta_launch": short},
        "localhost": {"aorta_results_dir_resolved": str(tmp_path)},  # the details file's is named from it
    }
    values = _node_results.host_values(hostvars, ["head-01", "gpu-node-07"], _node_results.NODE_VARS)
    assert {k: v for k, v in values["gpu-node-07"]["aorta_launch"].items() if k != "details"} == full
    # Under --check the result stays whole and nothing is written.
    (tmp_path / "logs" / "gpu-node-07.launch.json").unlink()
    assert launch_action(True, full).run(task_vars=node_vars) == full
    assert list((tmp_path / "logs").iterdir()) == []


def test_script_mode_does_not_sample():
    """Script mode writes to the config's output directory, shared with later runs: a sampled run's
    traces left there would be found changed by a pull later, so sample is refused (all and none,
    which pulls nothing later, are launched)."""
    action = ActionModule.__new__(ActionModule)
    s = {"aorta_collect_traces": "auto", "aorta_parse_on_nodes": False, "aorta_collect_all_max_nodes": 16}
    with pytest.raises(LaunchError, match=r"^aorta_collect_traces sample \(auto: 17 nodes, more than"):
        action._script_mode(s, {}, 17)
    with pytest.raises(LaunchError, match=r"^aorta_collect_traces sample \(aorta_parse_on_nodes true"):
        action._script_mode(dict(s, aorta_parse_on_nodes=True), {}, 1)
    with pytest.raises(LaunchError, match=r"Use aorta_master_launch_mode=torchrun or aorta_collect_traces=all\.$"):
        action._script_mode(dict(s, aorta_collect_traces="sample"), {}, 1)
    where = {"aorta_container_mount_path": "/mnt", "aorta_base_config": "config/c.yaml", "aorta_training_overrides": {}}
    for mode in (False, "all", "auto"):
        assert action._script_mode(dict(s, aorta_collect_traces=mode, **where), {}, 1)
