# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's one wait loop, for the head's watch and each node's own wait: scripted reads and
remote command results on a fake clock, and its commands run by a real shell on real files."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _watch


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


# --- One node's own wait (run_wait, node_end): the same loop on scripted remote command results ---


class Clock:
    """A fake monotonic clock: each remote command is a long poll of ``poll_s``; sleeping moves it on."""

    def __init__(self, poll_s=15):
        self.now, self.poll_s = 1000.0, poll_s

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def remote(clock, answers):
    """execute(command) as Ansible's low-level command answers: {rc, stdout}, or Unreachable raised."""
    calls = []

    def execute(command):
        calls.append(command)
        clock.now += clock.poll_s
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return execute, calls


def status_out(**status):
    return {"rc": 0, "stdout": f"\n{_watch.MARK}\n{json.dumps(status)}"}


MISSING = {"rc": 1, "stdout": f"\n{_watch.MARK}\n"}  # cat: no such file (not launched yet, or never)


def node_wait(answers, timeout_s=1000, **kwargs):
    clock = Clock()
    execute, calls = remote(clock, answers)
    read = _watch.reader(execute, _watch.long_poll_command("/st.json", None, 15))
    out = _watch.node_wait(read, timeout_s, poll_s=15, clock=clock, sleep=clock.sleep, **kwargs)
    return out, calls


def test_a_nodes_wait_reads_until_its_supervisor_finishes_and_keeps_no_aggregate():
    out, calls = node_wait([MISSING, status_out(state="running"), status_out(state="finished", finished=True)])
    assert out == {"finished": True, "status": {"state": "finished", "finished": True}, "polls": 3}
    assert len(calls) == 3 and all("/st.json" in c and "aggregates" not in c for c in calls)


def test_a_status_never_written_past_the_bound_is_said_and_a_half_written_one_is_not_a_status():
    out, _calls = node_wait([MISSING] * 20)
    assert out["lost"] == "the supervisor never wrote its status" and out["status"] is None
    assert out["polls"] * 15 > _time_bounds.NEVER_STARTED_S >= (out["polls"] - 1) * 15
    half = {"rc": 0, "stdout": f"\n{_watch.MARK}\n" + '{"state": "runn'}
    out, _calls = node_wait([status_out(state="running"), half, status_out(state="finished", finished=True)])
    assert out["finished"] is True and out["polls"] == 3


def test_a_node_unreachable_for_one_read_is_read_again_and_three_in_a_row_is_data():
    blip = [status_out(state="running"), _watch.Unreachable("reset"), status_out(finished=True)]
    out, _calls = node_wait(blip)
    assert out["finished"] is True and "node_unreachable" not in out
    out, _calls = node_wait([status_out(state="running")] + [_watch.Unreachable("no route to host")] * 3)
    assert out["node_unreachable"] is True and out["finished"] is False and out["msg"] == "no route to host"
    assert out["status"] == {"state": "running"} and out["polls"] == 4 and "lost" not in out


def test_a_node_the_head_named_silent_is_not_asked_again():
    told = "no heartbeat from w2 for 31 s"
    out, calls = node_wait([_watch.Unreachable("timed out"), status_out(finished=True)], gone=lambda: told)
    assert out["node_unreachable"] is True and len(calls) == 1
    assert out["msg"] == f"timed out (the others were told: {told})"


def test_a_supervisor_that_does_not_finish_in_time_is_said_with_its_last_status():
    out, _calls = node_wait([status_out(state="running", left_s=n) for n in range(10)], timeout_s=60)
    assert out["lost"] == "the supervisor did not finish in time" and out["finished"] is False
    assert out["status"]["left_s"] == 4 and out["polls"] == 5  # 5 reads of 15 s each passed 60 s


def test_each_read_keeps_the_nodes_snapshot_and_one_line_per_poll_is_printed_for_the_whole_run(tmp_path):
    clock, said = Clock(), []
    progress = str(tmp_path / ".progress")
    polls = {node: _watch.node_poll(progress, node, 3, 200, 15, said.append, clock=clock) for node in ("head", "w1")}
    polls["head"](None, None)  # nothing read yet: nothing kept, nothing said
    assert not (tmp_path / ".progress").exists()
    polls["head"](None, {"state": "running", "progress": {"0": 7}, "left_s": 100, "log_tail": "x"})
    polls["w1"](None, {"state": "running", "progress": {"1": 5}, "left_s": 99})  # same interval: no second line
    assert said == ["running 1/3 nodes · 2 starting · step 7/200 · 01:40 left"]
    clock.sleep(15)
    polls["w1"](None, {"state": "running", "progress": {"1": 6}, "left_s": 85})
    assert said[-1] == "running 2/3 nodes · 1 starting · step 7/200 · slowest rank 1 (w1) at 6 · 01:25 left"
    kept = json.loads((tmp_path / ".progress" / "head.json").read_text())
    assert kept["progress"] == {"0": 7} and "log_tail" not in kept


def test_the_heads_watch_keeps_the_heads_record_and_at_the_end_every_node_as_the_head_heard_it(tmp_path):
    said = []
    on_poll = _watch.head_poll(str(tmp_path), "head", 2, None, said.append)
    silent = {"w1": "no heartbeat from w1 for 31 s"}
    agg = aggregate(head=node(finished=True, outcome="failed"), w1=node())
    agg["silent"] = silent
    on_poll(agg, {"finished": False, "state": "running", "silent_nodes": silent})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head.json"] and said[-1].startswith("running 0/2")
    on_poll(agg, {"finished": True, "state": "finished", "silent_nodes": silent})
    assert json.loads((tmp_path / "w1.json").read_text())["state"] == "silent"
    assert json.loads((tmp_path / "head.json").read_text())["silent_nodes"] == silent


def run_shell(command):
    started = time.monotonic()
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return out, time.monotonic() - started


def test_a_nodes_command_prints_its_status_at_once_when_finished_and_fails_when_there_is_none(tmp_path):
    path = tmp_path / "it's status.json"  # a quote in the path must not break the command
    path.write_text(json.dumps({"finished": True, "state": "finished"}, sort_keys=True))
    out, took = run_shell(_watch.long_poll_command(str(path), None, 10))
    assert out.returncode == 0 and _watch.parse(out.stdout) == (None, {"finished": True, "state": "finished"})
    assert took < 2
    out, _took = run_shell(_watch.long_poll_command(str(tmp_path / "none.json"), None, 1))
    assert out.returncode != 0 and _watch.parse(out.stdout) == (None, None)


def test_a_nodes_command_waits_up_to_the_poll_and_returns_early_when_the_run_finishes(tmp_path):
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"finished": False, "state": "running"}, sort_keys=True))
    out, took = run_shell(_watch.long_poll_command(str(path), None, 2))
    assert _watch.parse(out.stdout)[1]["state"] == "running" and 1.5 < took < 5

    def finish():
        time.sleep(1)
        path.write_text(json.dumps({"finished": True, "state": "finished"}, sort_keys=True))

    threading.Thread(target=finish).start()
    out, took = run_shell(_watch.long_poll_command(str(path), None, 30))
    assert _watch.parse(out.stdout)[1]["state"] == "finished" and took < 5
