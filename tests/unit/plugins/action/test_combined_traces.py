# SPDX-License-Identifier: GPL-3.0-or-later
"""combined_traces runs in the controller's own Python: a hosts' ansible_python_interpreter the
controller does not have (a cluster file's vars set it for every host, implicit localhost included)
no longer stops the tree from being written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.action.combined_traces import ActionModule
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _stream


def streamed(tmp_path, rank, name, ranks):
    """One node's files as node_end leaves them: streamed (here from a local directory) into staging."""
    root = tmp_path / name
    for r in ranks:
        trace = root / "torch_profiler" / f"rank{r}" / "trace_step6.json"
        trace.parent.mkdir(parents=True)
        trace.write_text(json.dumps({"distributedInfo": {"rank": r, "world_size": 4}, "traceEvents": []}))
    tree = tmp_path / "results" / ".staging" / f"node_{rank}" / "tree"
    argv = ["sh", "-c", _stream.remote_command(sys.executable, str(root), time.time() - 3600, "auto")]
    return {"rank": rank, "name": name, "state": "ok", "tree": str(tree), **_stream.pull(argv, str(tree), 30)}


def test_the_tree_is_written_whatever_interpreter_the_hosts_were_given(repo, tmp_path):
    """As a cluster file's vars do: every host, localhost too, told of a Python only the nodes have."""
    nodes = [streamed(tmp_path, 0, "a", [0, 1]), streamed(tmp_path, 1, "b", [2, 3])]
    dest = tmp_path / "results" / "combined_traces"
    args = {"dest": str(dest), "run_id": "r1", "expected_ranks": 4, "nodes": nodes}
    playbook = tmp_path / "play.yml"
    task = {"name": "Write the tree", "aorta.cluster.combined_traces": args}
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    inventory = tmp_path / "hosts.yml"
    interpreter = {"ansible_connection": "local", "ansible_python_interpreter": "/opt/nodes-only/bin/python3"}
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": interpreter}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", str(inventory)]
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["found_ranks"] == [0, 1, 2, 3] and manifest["nodes_not_collected"] == []
    assert (dest / "node_1" / "torch_profiler" / "rank3" / "trace_step6.json").is_file()


def test_check_mode_and_bad_arguments_write_nothing(play, tmp_path):
    dest = tmp_path / "results" / "combined_traces"
    nodes = [streamed(tmp_path, 0, "a", [0, 1])]
    args = {"dest": str(dest), "run_id": "r1", "expected_ranks": 2, "nodes": nodes}
    _rc, out = play({"aorta.cluster.combined_traces": args, "check_mode": True})
    assert not out.get("failed"), out
    assert out["changed"] is True and out["manifest"]["found_ranks"] == [0, 1] and not dest.exists()
    _rc, out = play({"aorta.cluster.combined_traces": dict(args, expected_ranks="two")})
    assert out["failed"] and "expected_ranks" in out["msg"] and not dest.exists()


def action(args, check_mode=False):
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, action="aorta.cluster.combined_traces")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    return ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)


def ended_vars(nodes, launch=None, **settings):
    """After every node's end: each node's aorta_end with its collection, the head's launch."""
    hostvars = {node["name"]: {"aorta_end": {"node_result": {}, "collect": node}} for node in nodes}
    if launch is not None:
        hostvars[nodes[0]["name"]]["aorta_launch"] = launch
    return {"groups": {"aorta_nodes": [n["name"] for n in nodes]}, "hostvars": hostvars, **settings}


def test_the_ranks_and_nodes_come_from_the_nodes_results(tmp_path):
    nodes = [streamed(tmp_path, 0, "a", [0, 1]), streamed(tmp_path, 1, "b", [2, 3])]
    dest = tmp_path / "results" / "combined_traces"
    found = ended_vars(nodes, {"head": "a", "nnodes": 2, "nproc": 2}, aorta_gpus_per_node=8)
    out = action({"dest": str(dest), "run_id": "r1"}).run(task_vars=found)
    assert not out.get("failed"), out
    assert out["manifest"]["expected_ranks"] == [0, 1, 2, 3] and out["missing_ranks"] == []
    assert [n["name"] for n in out["manifest"]["nodes"]] == ["a", "b"] and "headline_lines" not in out
    # Node b never ended (its results were never registered): a's files only, b's ranks missing.
    (tmp_path / "again").mkdir()
    found = ended_vars([streamed(tmp_path / "again", 0, "a", [0, 1])], {"head": "a", "nnodes": 2, "nproc": 2})
    found["groups"]["aorta_nodes"].append("b")
    out = action({"dest": str(dest), "run_id": "r1"}, check_mode=True).run(task_vars=found)
    assert out["missing_ranks"] == [2, 3] and [n["name"] for n in out["manifest"]["nodes"]] == ["a"]


def test_without_a_launch_the_configured_ranks_count_and_given_arguments_win(tmp_path):
    nodes = [streamed(tmp_path, 0, "a", [0, 1])]
    dest = str(tmp_path / "results" / "combined_traces")
    found = ended_vars(nodes, aorta_nproc_per_node=None, aorta_gpus_per_node="3")
    out = action({"dest": dest, "run_id": "r1"}, check_mode=True).run(task_vars=found)
    assert out["manifest"]["expected_ranks"] == [0, 1, 2] and out["missing_ranks"] == [2]
    out = action({"dest": dest, "run_id": "r1", "expected_ranks": 2, "nodes": []}, check_mode=True).run(task_vars=found)
    assert out["manifest"]["expected_ranks"] == [0, 1] and out["manifest"]["nodes"] == []


def test_no_node_ended_skips_and_no_rank_count_fails(tmp_path):
    dest = str(tmp_path / "results" / "combined_traces")
    out = action({"dest": dest, "run_id": "r1"}).run(
        task_vars={"groups": {"aorta_nodes": ["a"]}, "hostvars": {"a": {}}}
    )
    assert out["skipped"] and "nothing to collect" in out["msg"] and not (tmp_path / "results").exists()
    out = action({"dest": dest, "run_id": "r1"}).run(task_vars=ended_vars([{"rank": 0, "name": "a"}]))
    assert out["failed"] and out["msg"].startswith("expected_ranks: not given") and not (tmp_path / "results").exists()
