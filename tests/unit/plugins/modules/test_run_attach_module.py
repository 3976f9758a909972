# SPDX-License-Identifier: GPL-3.0-or-later
"""run_attach on a node: what the launch kept, the supervisor's status and the lease, read back as
they are (nothing written), for a run that is there and for one that is not."""

from __future__ import annotations

import json
import os
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import Lease
from ansible_collections.aorta.cluster.plugins.modules import run_attach


def test_a_launched_run_is_read_back_with_its_status_and_lease(run_module, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    kept = {"launch": {"rank": 1}, "prepare": {"reached": True}, "supervisor_pid": 42}
    (runs / "r1.attach.json").write_text(json.dumps(kept))
    (runs / "r1.json").write_text(json.dumps({"state": "running", "finished": False, "progress": {"0": 5}}))
    Lease(str(tmp_path)).acquire({"run_id": "r1", "owner": "me@ctl", "expires_at": time.time() + 600}, time.time())
    result = run_module(run_attach, {"run_id": "r1", "directory": str(tmp_path)})
    assert not result["changed"] and result["attach"] == kept
    assert result["status"] == {
        "state": "running",
        "finished": False,
        "outcome": None,
        "reason": None,
        "ended_at": None,
    }
    assert (
        result["lease"]["run_id"] == "r1"
        and result["lease"]["live"]
        and "run r1 (owner me@ctl" in result["lease"]["line"]
    )
    # Another id: nothing of it here, and the lease names who holds the node.
    other = run_module(run_attach, {"run_id": "r2", "directory": str(tmp_path), "purpose": "stop"})
    assert other["attach"] is None and other["status"] is None and other["lease"]["run_id"] == "r1"
    assert sorted(p.name for p in runs.iterdir()) == ["r1.attach.json", "r1.json"]


def test_a_free_node_reads_as_nothing(run_module, tmp_path):
    result = run_module(run_attach, {"run_id": "r1", "directory": str(tmp_path / "none")})
    assert result["attach"] is None and result["status"] is None and result["lease"] is None


def test_a_stop_asks_the_head_once_and_waits_for_the_supervisor_within_its_bound(run_module, tmp_path):
    runs, aggregates = tmp_path / "runs", tmp_path / "aggregates"
    runs.mkdir()
    aggregates.mkdir()
    (runs / "r1.json").write_text(json.dumps({"state": "running", "finished": False}))
    args = {"run_id": "r1", "directory": str(tmp_path), "purpose": "stop", "stop_reason": "stopped by me"}
    # A worker (no aggregate of the run here) is not asked, and nobody waits when told not to.
    worker = run_module(run_attach, args)
    assert worker["asked_head"] is False and worker["waited_s"] == 0 and not (aggregates / "r1.stop").exists()
    # The head: the request written beside its aggregate; a supervisor that does not finish is waited
    # for to the bound, then read again.
    (aggregates / "r1.json").write_text("{}")
    head = run_module(run_attach, dict(args, wait_seconds=1))
    assert head["asked_head"] is True and head["changed"] is True
    assert (aggregates / "r1.stop").read_text() == "stopped by me\n"
    assert 1 <= head["waited_s"] < 5 and head["status"]["state"] == "running"
    # Check mode writes nothing; a run that has ended is not asked.
    (aggregates / "r1.stop").unlink()
    assert run_module(run_attach, args, check=True)["asked_head"] is False and not (aggregates / "r1.stop").exists()
    (runs / "r1.json").write_text(json.dumps({"state": "finished", "finished": True, "outcome": "ok"}))
    ended = run_module(run_attach, dict(args, wait_seconds=30))
    assert ended["asked_head"] is False and ended["waited_s"] == 0 and not (aggregates / "r1.stop").exists()


def test_a_kept_launch_that_cannot_be_read_says_why(run_module, tmp_path):
    runs = tmp_path / "runs"
    (runs / "r1.attach.json").mkdir(parents=True)  # unreadable as a file, whoever reads it (root too)
    result = run_module(run_attach, {"run_id": "r1", "directory": str(tmp_path)})
    assert result["attach"] is None and result["attach_error"] == "unreadable here (Is a directory)"
    assert run_module(run_attach, {"run_id": "r2", "directory": str(tmp_path)})["attach_error"] == ""


def test_the_stops_wait_grows_by_what_the_runs_own_grace_exceeds_the_stops():
    kept = {"launch": {"deadlines": {"grace_s": 300}}}
    assert run_attach.stop_wait_s(100, 30, kept) == 370
    assert run_attach.stop_wait_s(100, 30, {"launch": {"deadlines": {"grace_s": 10}}}) == 100
    assert run_attach.stop_wait_s(100, 30, None) == 100


def test_a_stop_by_a_campaigns_id_acts_on_the_campaigns_group_run_on_this_node(run_module, tmp_path):
    runs, aggregates = tmp_path / "runs", tmp_path / "aggregates"
    runs.mkdir()
    aggregates.mkdir()
    now = time.time()
    # Rung 1 ended here; rung 2's group 1 holds the node now and this node is its head.
    (runs / "c7-k1-g3.json").write_text(json.dumps({"state": "finished", "finished": True, "outcome": "ok"}))
    os.utime(runs / "c7-k1-g3.json", (now - 300, now - 300))
    (runs / "c7-k2-g1.json").write_text(json.dumps({"state": "running", "finished": False}))
    (runs / "c7-k2-g1.attach.json").write_text(json.dumps({"launch": {"rank": 0}}))
    (aggregates / "c7-k2-g1.json").write_text("{}")
    Lease(str(tmp_path)).acquire({"run_id": "c7-k2-g1", "owner": "me@ctl", "expires_at": now + 600}, now)
    args = {"run_id": "c7", "directory": str(tmp_path), "purpose": "stop", "stop_reason": "stopped by me"}
    held = run_module(run_attach, args)
    assert held["run_id"] == "c7-k2-g1" and held["asked_head"] is True and held["attach"] == {"launch": {"rank": 0}}
    assert (aggregates / "c7-k2-g1.stop").read_text() == "stopped by me\n"
    # A watch is never by a campaign's id; another campaign's (c7-k2's) id or a run's own is not widened.
    assert run_module(run_attach, dict(args, purpose="watch"))["run_id"] == "c7"
    assert run_module(run_attach, dict(args, run_id="c7-k2"))["run_id"] == "c7-k2"
    (runs / "c7.json").write_text(json.dumps({"state": "finished", "finished": True}))
    assert run_module(run_attach, args)["run_id"] == "c7"
    (runs / "c7.json").unlink()
    # Free again (the group ended and released it; the node sits out the next rung): the campaign's
    # newest run here answers, ended, so nothing is asked.
    Lease(str(tmp_path)).release("c7-k2-g1")
    (runs / "c7-k2-g1.json").write_text(json.dumps({"state": "finished", "finished": True, "outcome": "stopped"}))
    (aggregates / "c7-k2-g1.stop").unlink()
    ended = run_module(run_attach, args)
    assert ended["run_id"] == "c7-k2-g1" and ended["asked_head"] is False and ended["status"]["finished"] is True
    # A node the campaign never ran on: the id is its own.
    assert run_module(run_attach, dict(args, directory=str(tmp_path / "none")))["run_id"] == "c7"
    # Every stop by the campaign's id left it on the node: a later group of the campaign is refused there.
    assert (tmp_path / "stops" / "c7").read_text() == "stopped by me\n"
    assert (tmp_path / "none" / "stops" / "c7").exists()


def test_a_stop_of_a_run_by_its_own_id_leaves_no_campaign_stop(run_module, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1.json").write_text(json.dumps({"state": "running", "finished": False}))
    run_module(run_attach, {"run_id": "r1", "directory": str(tmp_path), "purpose": "stop", "stop_reason": "x"})
    assert not (tmp_path / "stops").exists()
    run_module(run_attach, {"run_id": "c9", "directory": str(tmp_path), "purpose": "stop"}, check=True)
    assert not (tmp_path / "stops").exists()  # check mode writes nothing
