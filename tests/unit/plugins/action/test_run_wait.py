# SPDX-License-Identifier: GPL-3.0-or-later
"""run_wait as ansible-playbook runs it (a local connection standing for the node): its task interface
over plugin_utils/watch/_watch.py's loop (tested there with scripted reads): a finished supervisor read once,
its snapshot kept and the async results file removed; one that does not finish in time said."""

from __future__ import annotations

import json


def test_a_finished_supervisor_is_read_once_its_snapshot_kept_and_the_results_file_removed(tmp_path, play):
    status = tmp_path / "it's run.json"
    status.write_text(json.dumps({"finished": True, "state": "finished", "outcome": "ok", "log_tail": "x"}))
    results = tmp_path / "job.results"
    results.write_text("{}")
    rc, out = play(
        {
            "aorta.cluster.run_wait": {
                "status_path": str(status),
                "timeout_seconds": 60,
                "poll_seconds": 1,
                "progress_dir": str(tmp_path / "progress"),
                "total_nodes": 2,
                "results_file": str(results),
            }
        }
    )
    assert rc == 0 and out["finished"] is True and out["polls"] == 1 and out["changed"] is False, out
    assert out["status"]["outcome"] == "ok" and "aggregate" not in out and not results.exists()
    kept = json.loads((tmp_path / "progress" / "localhost.json").read_text())
    assert kept["state"] == "finished" and "log_tail" not in kept


def test_a_supervisor_that_does_not_finish_in_time_is_lost_not_failed(tmp_path, play):
    status = tmp_path / "run.json"
    status.write_text(json.dumps({"finished": False, "state": "running"}))
    rc, out = play({"aorta.cluster.run_wait": {"status_path": str(status), "timeout_seconds": 1, "poll_seconds": 1}})
    assert rc == 0 and out["finished"] is False and not out.get("failed"), out
    assert out["lost"] == "the supervisor did not finish in time" and out["status"]["state"] == "running"
