# SPDX-License-Identifier: GPL-3.0-or-later
"""The straggler test on recorded healthy and planted-straggler stand-in traces, and what too few
profiled steps can show."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils import _report, _stragglers

STRAGGLERS = Path(__file__).parent / "straggler_data"


@pytest.mark.parametrize("run", [f"ok{i}" for i in range(1, 6)])
def test_healthy_stand_in_runs_name_no_straggler(run):
    report = _report.build_report(str(STRAGGLERS / run))
    assert report["stragglers"] == [], report["stragglers"]
    assert report["straggler_test"]["verdict"] == "none stands out"
    assert report["straggler_test"]["steps"] == 4 and report["straggler_test"]["ranks"] == 4


@pytest.mark.parametrize("run", ["slow1", "slow2", "slow3"])
def test_a_rank_planted_at_one_and_a_half_times_compute_is_named_first(run):
    report = _report.build_report(str(STRAGGLERS / run))
    first = report["stragglers"][0]
    assert first["rank"] == 2 and first["excess_ratio"] > 0.1
    assert min(first["p_value_steps"], first["p_value_arrivals"]) < report["straggler_test"]["alpha"]


def test_two_profiled_steps_cannot_name_anyone_and_the_report_says_why(tmp_path):
    ranks = [
        {"rank": r, "node": "n", "compute_per_iteration_ms": 1.0, "comm_wait_per_iteration_ms": 1.0} for r in range(4)
    ]
    evidence = {
        r: {"step_compute_ms": [[1, 5.0 * (2 if r == 3 else 1)], [2, 5.0 * (2 if r == 3 else 1)]]} for r in range(4)
    }
    slow, _nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    # Alone the slowest in 2 of 2 steps among 4 ranks: 4 x (1/4)^2 = 25% by chance alone.
    assert slow == [] and "profile at least 4 steps" in test["verdict"]
    evidence = {r: {"step_compute_ms": [[k, 5.0 * (2 if r == 3 else 1)] for k in range(4)]} for r in range(4)}
    slow, _nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    assert [s["rank"] for s in slow] == [3] and slow[0]["p_value_steps"] == pytest.approx(4 * 0.25**4)
