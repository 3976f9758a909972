# SPDX-License-Identifier: GPL-3.0-or-later
"""run_watch as ansible-playbook runs it (a local connection standing for the head): one read of a
finished head, its progress line and the head's record kept for the nodes' own waits."""

from __future__ import annotations

import json


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
