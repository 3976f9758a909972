# SPDX-License-Identifier: GPL-3.0-or-later
"""The one summary line per poll, from every node's latest supervisor status."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.plugin_utils.watch._progress import (
    due_line,
    load_all_snapshots,
    named_silent,
    progress_line,
    save_snapshot,
)


def snap(state="running", progress=None, left=192.0, outcome=None):
    return {"state": state, "progress": progress or {}, "left_s": left, "outcome": outcome, "log_tail": "x" * 10}


def test_line_names_running_nodes_step_slowest_rank_and_time_left():
    line = progress_line(
        {
            "head": snap(progress={"0": 17, "1": 17}),
            "w1": snap(progress={"2": 17, "3": 12}, left=190.4),
        },
        total_nodes=3,
        total_steps=200,
    )
    assert line == "running 2/3 nodes · 1 starting · step 17/200 · slowest rank 3 (w1) at 12 · 03:10 left"


def test_equal_ranks_name_no_slowest_and_finished_nodes_are_counted():
    line = progress_line(
        {"a": snap(progress={"0": 4}), "b": snap("finished", {"1": 4}, outcome="failed")}, total_nodes=2
    )
    assert line == "running 1/2 nodes · 1 finished (1 not ok) · step 4 · 03:12 left"


def test_hours_and_no_progress_yet():
    assert progress_line({"a": snap(left=3725)}, total_nodes=1) == "running 1/1 nodes · 1:02:05 left"


def test_snapshots_round_trip_without_the_log_tail(tmp_path):
    save_snapshot(str(tmp_path), "10.0.0.1", snap(progress={"0": 1}))
    save_snapshot(str(tmp_path), "10.0.0.1", snap(progress={"0": 2}))
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / ".printed").write_text("1.0")
    loaded = load_all_snapshots(str(tmp_path))
    assert list(loaded) == ["10.0.0.1"]
    assert loaded["10.0.0.1"]["progress"] == {"0": 2} and "log_tail" not in loaded["10.0.0.1"]


def test_a_node_the_head_named_silent_is_known_gone_to_its_own_wait(tmp_path):
    save_snapshot(str(tmp_path), "w1", snap())
    assert named_silent(str(tmp_path), "w2") is None
    stop = {"node": "w2", "kind": "silent", "reason": "no heartbeat from w2 for 31 s", "by": "head"}
    save_snapshot(str(tmp_path), "w1", dict(snap(), cluster_stop=stop))
    assert named_silent(str(tmp_path), "w2") == "no heartbeat from w2 for 31 s"
    assert named_silent(str(tmp_path), "w1") is None
    failed = dict(stop, kind="failed")  # a node that said it failed answers for itself
    save_snapshot(str(tmp_path), "w1", dict(snap(), cluster_stop=failed))
    assert named_silent(str(tmp_path), "w2") is None
    assert named_silent(str(tmp_path / "missing"), "w2") is None


def test_one_line_per_poll_interval_whoever_asks_first(tmp_path):
    save_snapshot(str(tmp_path), "a", snap(progress={"0": 3}))
    assert due_line(str(tmp_path), 1, 10, 15, clock=lambda: 100.0) == "running 1/1 nodes · step 3/10 · 03:12 left"
    assert due_line(str(tmp_path), 1, 10, 15, clock=lambda: 110.0) is None  # another node's wait, same interval
    assert due_line(str(tmp_path), 1, 10, 15, clock=lambda: 114.6) is not None  # within half a second of the poll
