# SPDX-License-Identifier: GPL-3.0-or-later
"""stop_record: what a stop by id did, from every node's run_attach result, as one console line
whatever the node count, and as an entry appended to the run's run.json (the rest kept)."""

from __future__ import annotations

import datetime as dt
import json

from ansible_collections.aorta.cluster.plugins.action.stop_record import append_stop, stop_entry, stop_line, unknown

NOW = dt.datetime(2026, 12, 6, 11, 30, tzinfo=dt.timezone.utc)


def test_the_entry_counts_the_finished_and_names_the_rest():
    stops = {
        "h": {"state": "finished", "asked_head": True},
        "n1": {"state": "finished"},
        "n2": {"state": "terminating"},
        "n3": {"state": "excluded"},
    }
    entry = stop_entry(stops, "me@ctl (ansible-playbook pid 7)", NOW)
    assert entry == {
        "at": "2026-12-06T11:30:00Z",
        "by": "me@ctl (ansible-playbook pid 7)",
        "asked_head": True,
        "finished": 2,
        "not_finished": {"n2": "terminating"},
        "unreachable": [],
        "not_in_this_stop": [],
        "runs": [],
    }
    line = stop_line("r1", entry, 4, "/r/run.json")
    assert line == (
        "stop r1: asked its head to stop every node; 2 of 4 nodes' supervisors finished; not finished, their "
        "containers removed now: n2 (terminating); added to /r/run.json"
    )


def test_a_campaigns_stop_names_the_group_runs_whose_heads_it_asked_in_one_line_at_1000_nodes():
    stops = {f"n{i}": {"state": "finished", "run_id": f"c7-k1-g{i}", "asked_head": True} for i in range(1000)}
    entry = stop_entry(stops, "me", NOW)
    assert len(entry["runs"]) == 1000 and entry["runs"][0] == "c7-k1-g0"
    line = stop_line("c7", entry, 1000, "")
    assert line.startswith("stop c7: a scaling campaign: asked the heads of its group runs (c7-k1-g0, c7-k1-g1, ")
    assert "and 990 more) to stop every node; 1000 of 1000 nodes' supervisors finished; no run.json" in line
    assert len(line) < 400, line
    # A run's own id: its head, as before.
    assert stop_line("r1", stop_entry({"h": {"run_id": "r1", "asked_head": True}}, "me", NOW), 1, "").startswith(
        "stop r1: asked its head to stop every node"
    )


def test_an_id_nothing_on_the_head_or_any_node_that_answered_holds_or_ran_is_refused_naming_the_heads_holder():
    absent = {"state": "absent", "holder": "the node is held by run r9 (owner you@ctl2)"}
    stops = {"h": absent, "n1": {"state": "absent", "holder": "the node is free"}, "n2": {"state": "unreachable"}}
    every = ["h", "n1", "n2"]
    assert unknown("r1", stops, every, "h") == "no run r1 on h: the node is held by run r9 (owner you@ctl2)"
    # A campaign's group reached n1 only: not refused (its heads were asked).
    assert unknown("r1", dict(stops, n1={"state": "finished", "run_id": "r1-k1-g1"}), every, "h") == ""
    # The head not reached, or left out by --limit: not refused here (the stop's line names it).
    assert unknown("r1", dict(stops, h={"state": "unreachable"}), every, "h") == ""
    assert unknown("r1", stops, ["n1"], "h") == ""


def test_nodes_the_stop_could_not_reach_are_named_apart_with_what_happens_to_them():
    stops = {"h": {"state": "unreachable"}, "n1": {"state": "finished"}, "n2": {"state": "unreachable"}}
    entry = stop_entry(stops, "me", NOW)
    assert entry["unreachable"] == ["h", "n2"] and entry["not_finished"] == {} and entry["finished"] == 1
    assert stop_line("r1", entry, 3, "/r/run.json") == (
        "stop r1: its head had nothing to stop; 1 of 3 nodes' supervisors finished; could not reach 2: h, n2 "
        "(nothing asked of them: what runs there stops at the run's deadline; run the stop again once they "
        "answer); added to /r/run.json"
    )
    every = stop_entry({f"n{i}": {"state": "unreachable"} for i in range(1000)}, "me", NOW)
    line = stop_line("r1", every, 1000, "")
    assert line.startswith("stop r1: no node answered; 0 of 1000 nodes' supervisors finished; could not reach 1000: ")
    assert "n9 and 990 more (nothing asked" in line and len(line) < 400, line


def test_nodes_a_limit_left_out_are_named_as_not_asked_never_as_removed():
    """``stop --limit n2``: the nodes outside the play were neither asked nor torn down; the line
    says so instead of listing them among those whose containers were removed."""
    stops = {"h": {}, "n1": {}, "n2": {"state": "absent"}}
    entry = stop_entry(stops, "me", NOW, played=["n2"])
    assert entry["not_in_this_stop"] == ["h", "n1"] and entry["not_finished"] == {}
    assert stop_line("r1", entry, 3, "/r/run.json", "h") == (
        "stop r1: its head h was left out by --limit; 0 of 3 nodes' supervisors finished; left out by --limit, "
        "nothing asked of them: h, n1 (run the stop without --limit to stop them); added to /r/run.json"
    )
    # Without a limit every node is in the play: the entry is as before.
    assert stop_entry(stops, "me", NOW, played=["h", "n1", "n2"])["not_in_this_stop"] == []


def test_the_line_stays_one_short_line_at_1000_nodes():
    stops = {f"node{i}": {"state": "running"} for i in range(1000)}
    line = stop_line("r1", stop_entry(stops, "me", NOW), 1000, "")
    assert len(line) < 400 and line.endswith("and 990 more; no run.json of it here"), line


def test_the_entry_is_appended_to_run_json_and_nothing_else_changes(tmp_path):
    path = tmp_path / "run.json"
    run = {"run_id": "r1", "status": "STOPPED", "stops": [{"at": "earlier"}]}
    path.write_text(json.dumps(run))
    entry = stop_entry({"h": {"state": "finished"}}, "me", NOW)
    assert append_stop(str(path), entry) is True
    assert json.loads(path.read_text()) == dict(run, stops=[{"at": "earlier"}, entry])
    assert append_stop(str(tmp_path / "missing.json"), entry) is False
    assert not (tmp_path / "missing.json").exists()
