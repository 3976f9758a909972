# SPDX-License-Identifier: GPL-3.0-or-later
"""run_diagnosis through ansible-playbook: the recorded stand-in hang gives its one line as msg."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parents[1] / "plugin_utils" / "results" / "diagnosis_data"


def test_the_recorded_hang_is_diagnosed_and_a_bad_status_is_refused(play):
    nodes = json.loads((DATA / "hang" / "run.json").read_text())["nodes"]
    task = {"results_dir": str(DATA / "hang"), "status": "TIMEOUT", "nodes": nodes, "nproc_per_node": 2}
    _rc, out = play({"aorta.cluster.run_diagnosis": task})
    assert not out.get("failed"), out
    assert [r["rank"] for r in out["diagnosis"]["behind"]] == [1]
    assert out["msg"] == out["diagnosis"]["summary"] and out["msg"].startswith("TIMEOUT: rank 1 (")
    _rc, bad = play({"aorta.cluster.run_diagnosis": dict(task, status="LOST")})
    assert bad["failed"] and "status" in bad["msg"]
