# SPDX-License-Identifier: GPL-3.0-or-later
"""stop_record: what a stop by id did, from every node's run_attach result, as one console line
whatever the node count, and as an entry appended to the run's run.json (the rest kept)."""

from __future__ import annotations

import datetime as dt
import json

from ansible_collections.aorta.cluster.plugins.action.stop_record import append_stop, stop_entry, stop_line

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
    }
    line = stop_line("r1", entry, 4, "/r/run.json")
    assert line == (
        "stop r1: asked its head to stop every node; 2 of 4 nodes' supervisors finished; not finished, their "
        "containers removed now: n2 (terminating); added to /r/run.json"
    )


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
