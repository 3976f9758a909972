# SPDX-License-Identifier: GPL-3.0-or-later
"""A run against a baseline: regression, improvement, within noise or same, on synthetic and recorded
stand-in runs; a bad baseline is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _baseline, _thresholds
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report

STRAGGLERS = Path(__file__).parent / "straggler_data"


BASELINES = Path(__file__).parent / "baseline_data"


def test_baseline_says_regression_for_a_slower_run_and_same_for_an_equal_one(tmp_path, combined_tree):
    healthy = _report.build_report(str(combined_tree(tmp_path / "a", [50, 50, 50, 50], bad_file=False)))
    _outputs.write_outputs(healthy, str(tmp_path / "then"))
    again = _report.build_report(str(combined_tree(tmp_path / "b", [50, 50, 50, 50], bad_file=False)))
    same = _baseline.compare_baseline(again, str(tmp_path / "then"))
    assert same["verdict"] == "same" and same["metrics"]["avg_step_time_ms"]["delta_ratio"] == 0
    slower = _report.build_report(
        str(combined_tree(tmp_path / "c", [50, 50, 50, 50], bad_file=False)), straggler_threshold=0.1
    )
    slower["performance"] = dict(
        slower["performance"], avg_step_time_ms=healthy["performance"]["avg_step_time_ms"] * 1.5
    )
    worse = _baseline.compare_baseline(slower, str(tmp_path / "then" / "aorta_benchmark_report.json"))
    assert worse["verdict"] == "regression" and worse["metrics"]["avg_step_time_ms"]["delta_ratio"] == pytest.approx(
        0.5
    )
    assert "Against the baseline" in _report_page.render_html(dict(slower, baseline=worse))
    # The verdict's line ends with who stands out.
    named = dict(worse, stands_out="stands out: rank 3 on n1 (+50% compute)")
    assert _report_page._baseline(named)["line"].endswith("; stands out: rank 3 on n1 (+50% compute)")


def test_baseline_change_inside_the_steps_noise_is_not_a_regression(tmp_path):
    """Recorded stand-in runs on a shared machine: healthy runs differ by up to 25% in iteration
    time with a step-to-step spread as large; that is not called a regression."""
    _outputs.write_outputs(_report.build_report(str(STRAGGLERS / "ok3")), str(tmp_path / "then"))
    result = _baseline.compare_baseline(_report.build_report(str(STRAGGLERS / "ok5")), str(tmp_path / "then"))
    assert result["metrics"]["avg_step_time_ms"]["delta_ratio"] > 0.05
    assert result["verdict"] == "within noise" and "within the steps' noise" in result["reason"]


def test_a_bad_baseline_is_named(tmp_path):
    report = _report.build_report(str(tmp_path))
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(_thresholds.ReportError, match=r"aorta_baseline: .*x\.json: not a report"):
        _baseline.compare_baseline(report, str(tmp_path / "x.json"))


@pytest.mark.parametrize(
    ("run", "verdict"), [("ok2", "same"), ("ok3", "same"), ("slow1", "regression"), ("slow2", "regression")]
)
def test_against_a_healthy_baseline_a_run_with_a_slow_rank_is_a_regression_and_a_healthy_one_is_not(
    tmp_path, run, verdict
):
    _outputs.write_outputs(_report.build_report(str(BASELINES / "ok1")), str(tmp_path / "then"))
    now = _report.build_report(str(BASELINES / run))
    result = _baseline.compare_baseline(now, str(tmp_path / "then"))
    assert result["verdict"] == verdict, result
    if verdict == "regression":
        # The report says who: the regression's line names the slow rank with its node.
        assert now["stragglers"][0]["rank"] == 2
        assert _baseline.stands_out(now).startswith(f"stands out: rank 2 on {now['stragglers'][0]['node']} (+")


def test_a_regression_names_the_slow_nodes_first_then_the_stragglers_then_says_nobody_stands_out():
    slow = [{"node": f"n{i}", "excess_ratio": 0.2} for i in range(5)]
    ranks = [{"rank": 7, "node": "n1", "excess_ratio": 0.5}]
    assert _baseline.stands_out({"slow_nodes": slow, "stragglers": ranks}) == (
        "stands out: slow node n0 (+20% compute), slow node n1 (+20% compute), slow node n2 (+20% compute) and 2 more"
    )
    assert _baseline.stands_out({"slow_nodes": [], "stragglers": ranks}) == "stands out: rank 7 on n1 (+50% compute)"
    assert _baseline.stands_out({"slow_nodes": [], "stragglers": []}) == _baseline.NOBODY_STANDS_OUT
    # Not tested (too few ranks or steps): it says so instead of blaming the whole cluster.
    untested = {"verdict": "not tested: fewer than two ranks with profiled steps"}
    assert _baseline.stands_out({"slow_nodes": [], "stragglers": [], "straggler_test": untested}) == (
        "no node or rank named (the straggler test: not tested: fewer than two ranks with profiled steps)"
    )
    # A row without its figure (or not a row) is named without one, or left out.
    assert _baseline.stands_out({"stragglers": ["x", {"rank": 1, "node": "n0", "excess_ratio": "?"}]}) == (
        "stands out: rank 1 on n0"
    )


def test_the_modules_default_tolerance_is_the_vocabularys():
    assert DEFAULTS["aorta_baseline_tolerance"] == _baseline.TOLERANCE
