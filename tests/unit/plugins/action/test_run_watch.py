# SPDX-License-Identifier: GPL-3.0-or-later
"""run_watch as ansible-playbook runs it (a local connection standing for the head): one read of a
finished head, its progress line and the head's record kept for the nodes' own waits."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aorta.cluster.plugins.action.run_watch import ActionModule
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt


def test_a_finished_head_is_read_once_and_its_record_kept(tmp_path, play):
    status, agg = tmp_path / "run1.json", tmp_path / "run1.cluster.json"
    silent = {"w2": "no heartbeat from w2 for 31 s"}
    status.write_text(json.dumps({"finished": True, "state": "finished", "silent_nodes": silent}, sort_keys=True))
    nodes = {
        "head": {"seen": True, "finished": True, "state": "cleaning", "outcome": "failed", "progress": {"0": 7}},
        "w2": {"seen": True, "finished": False, "state": "running", "progress": {"1": 3}},
    }
    agg.write_text(json.dumps({"nodes": nodes, "silent": silent, "stop": None}))
    rc, out = play(
        {
            "aorta.cluster.run_watch": {
                "status_path": str(status),
                "aggregate_path": str(agg),
                "head": "head",
                "timeout_seconds": 60,
                "poll_seconds": 1,
                "progress_dir": str(tmp_path / "progress"),
                "total_nodes": 2,
            }
        }
    )
    assert rc == 0 and out["finished"] is True and out["polls"] == 1, out
    assert out["aggregate"]["silent"] == silent
    kept = json.loads((tmp_path / "progress" / "head.json").read_text())
    assert kept["silent_nodes"] == silent  # where the dead node's own wait learns it is gone
    # Every other node as the head last heard it, for the line the nodes' own waits print next.
    assert json.loads((tmp_path / "progress" / "w2.json").read_text())["state"] == "silent"


def test_a_stop_the_user_asked_for_is_sent_to_the_head_once_before_the_next_read(tmp_path, monkeypatch):
    """The first Ctrl-C on the controller (plugin_utils/watch/_interrupt.py): the watch's next poll first
    writes the head's stop request (one command), then reads as before; never again."""
    monkeypatch.setenv(_interrupt.ENV, str(tmp_path))
    commands, said, result = [], [], {}
    reads = []
    read = ActionModule.stopping_reader(
        lambda: reads.append(1) or (None, None),
        lambda line: commands.append(line) or {"rc": 0},
        "/var/tmp/aorta-cluster/aggregates/r1.json",
        said.append,
        result,
    )
    read()
    assert commands == [] and "stop_requested" not in result
    (tmp_path / _interrupt.REQUEST).write_text('{"at": 1, "signal": "SIGINT", "reason": "interrupted (SIGINT)"}')
    read()
    read()
    assert len(commands) == 1 and "/var/tmp/aorta-cluster/aggregates/r1.stop" in commands[0]
    assert result["stop_requested"]["phase"] == "while training" and len(reads) == 3
    assert said == ["asked the head to stop every node: interrupted (SIGINT)"]


def test_the_watch_ends_when_its_ansible_playbook_is_gone(monkeypatch):
    """A SIGKILLed ansible-playbook (an AWX cancel) leaves its workers in their own process groups:
    the head's watch must not go on polling for nobody."""
    parents = iter([100, 100, 1])
    monkeypatch.setattr("os.getppid", lambda: next(parents))

    class Ended(Exception):
        pass

    def exit_(code):
        raise Ended(code)

    monkeypatch.setattr("os._exit", exit_)
    read = ActionModule.stopping_reader(lambda: (None, None), lambda line: {}, "/a/r1.json", print, {})
    assert read() == (None, None)
    with pytest.raises(Ended):
        read()
