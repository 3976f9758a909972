# SPDX-License-Identifier: GPL-3.0-or-later
"""run_attach on a node: what the launch kept, the supervisor's status and the lease, read back as
they are (nothing written), for a run that is there and for one that is not."""

from __future__ import annotations

import json
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
