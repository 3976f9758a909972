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

from ansible_collections.aorta.cluster.plugins.plugin_utils import _stream


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
