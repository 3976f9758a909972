# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's one wait: scripted reads of the head's aggregate, and its command run by a real
shell on real files."""

from __future__ import annotations

import json
import subprocess
import time

from ansible_collections.aorta.cluster.plugins.plugin_utils import _watch


def aggregate(**nodes):
    return {"nodes": nodes, "silent": {}, "stop": None}


def node(state="running", finished=False, progress=None, seen=True, outcome=None):
    return {"seen": seen, "state": state, "finished": finished, "progress": progress or {}, "outcome": outcome}


class Script:
    """read() answers from a list: a tuple, or an exception to raise."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def __call__(self):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_one_read_per_poll_until_the_head_says_finished():
    running = (aggregate(head=node(), w1=node()), {"finished": False, "left_s": 100})
    done = (aggregate(head=node(finished=True), w1=node(finished=True)), {"finished": True})
    script, seen = Script([running, running, done]), []
    out = _watch.watch(script, 1000, lambda a, s: seen.append(a), sleep=lambda s: None)
    assert out["finished"] is True and out["polls"] == 3 == script.calls and len(seen) == 3
    assert out["aggregate"]["nodes"]["w1"]["finished"] is True


def test_a_head_that_cannot_be_reached_three_times_in_a_row_is_lost_and_a_blip_is_not():
    running = (aggregate(head=node()), {"finished": False})
    blip = Script([running, _watch.Unreachable("reset"), running, (aggregate(), {"finished": True})])
    assert _watch.watch(blip, 1000, sleep=lambda s: None)["finished"] is True
    gone = Script([running] + [_watch.Unreachable("no route to host")] * 3)
    out = _watch.watch(gone, 1000, sleep=lambda s: None)
    assert out["head_lost"] is True and out["finished"] is False and "no route to host" in out["lost"]
    assert out["status"] == {"finished": False}  # the last record seen is kept


def test_a_head_that_never_wrote_its_status_and_one_that_never_finishes_are_said():
    clock = iter(range(0, 10_000, 60)).__next__
    out = _watch.watch(Script([(None, None)] * 5), 1000, clock=clock, sleep=lambda s: None)
    assert out["lost"] == "the head's supervisor never wrote its status"
    clock = iter(range(0, 10_000, 60)).__next__
    out = _watch.watch(Script([(None, {"finished": False})] * 50), 600, clock=clock, sleep=lambda s: None)
    assert out["lost"] == "the head's supervisor did not finish in time" and out["status"] == {"finished": False}


def test_snapshots_name_finished_and_silent_nodes_and_skip_those_never_heard_from():
    agg = aggregate(
        head=node(progress={"0": 5}),
        w1=node(finished=True, outcome="ok"),
        w2=node(),
        w3=node(seen=False),
        w4=node(state="joining"),
    )
    agg["silent"] = {"w2": "no heartbeat from w2 for 31 s"}
    snaps = _watch.snapshots(agg, {"left_s": 42.0})
    assert {k: v["state"] for k, v in snaps.items()} == {"head": "running", "w1": "finished", "w2": "silent"}
    assert snaps["head"]["left_s"] == 42.0 and snaps["head"]["progress"] == {"0": 5}


def test_the_command_prints_both_files_and_returns_as_soon_as_the_head_finishes(tmp_path):
    status, agg = tmp_path / "it's.json", tmp_path / "run.cluster.json"
    status.write_text(json.dumps({"finished": False}, sort_keys=True))
    started = time.monotonic()
    out = subprocess.run(
        ["sh", "-c", _watch.long_poll_command(str(status), str(agg), 2)], capture_output=True, text=True, check=True
    )
    assert 1.5 < time.monotonic() - started < 5
    assert _watch.parse(out.stdout) == (None, {"finished": False})  # no aggregate yet
    agg.write_text(json.dumps(aggregate(head=node())))
    status.write_text(json.dumps({"finished": True}, sort_keys=True))
    started = time.monotonic()
    out = subprocess.run(
        ["sh", "-c", _watch.long_poll_command(str(status), str(agg), 30)], capture_output=True, text=True, check=True
    )
    assert time.monotonic() - started < 2
    got_agg, got_status = _watch.parse(out.stdout)
    assert got_agg["nodes"]["head"]["state"] == "running" and got_status == {"finished": True}
    assert _watch.parse('{"half') == (None, None)
