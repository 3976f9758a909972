# SPDX-License-Identifier: GPL-3.0-or-later
"""check_variables reads the variables as the play sees them, templated, and names each bad one."""

from __future__ import annotations


def test_bad_values_fail_naming_each_and_templated_good_ones_pass(play):
    _rc, out = play({"aorta.cluster.check_variables": {}}, {"aorta_output_dir": "../../etc", "aorta_poll_seconds": 0})
    assert out["failed"]
    assert out["errors"] == [
        "aorta_poll_seconds: 0 must be at least 1",
        "aorta_output_dir: '../../etc' must stay under aorta_path (a relative path that does not climb out with '..')",
    ]
    _rc, good = play(
        {"aorta.cluster.check_variables": {}},
        {"aorta_run": "r1", "aorta_output_dir": "aorta_runs/{{ aorta_run }}", "aorta_timeout_seconds": "60"},
    )
    assert not good.get("failed") and good["errors"] == []
    assert {"aorta_output_dir", "aorta_timeout_seconds"} <= set(good["checked"])
