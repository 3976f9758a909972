# SPDX-License-Identifier: GPL-3.0-or-later
"""CVS's expected_results: the values each threshold may take (as CVS accepts them), survey text, and
CVS's meaning of max_avg_iteration_ms on a real trace."""

from __future__ import annotations

import math

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _thresholds
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report


@pytest.mark.parametrize(
    ("expected", "words"),
    [
        ({"min_compute_ratio": 1.1}, "min_compute_ratio: 1.1 must be a number from 0 to 1"),
        ({"min_overlap_ratio": -0.1}, "min_overlap_ratio: -0.1 must be a number from 0 to 1"),
        ({"max_avg_iteration_ms": math.nan}, "max_avg_iteration_ms: nan must be a number from 0"),
        ({"max_avg_iteration_ms": -1}, "max_avg_iteration_ms: -1 must be a number from 0"),
        ({"max_time_variance_ratio": "x"}, "max_time_variance_ratio: 'x' is not a number"),
        ({"max_iteration": 1}, "unknown threshold max_iteration"),
        ("min_compute_ratio=2", "min_compute_ratio: '2' must be a number from 0 to 1"),
        (["a"], "must be a mapping"),
    ],
)
def test_each_bad_threshold_is_one_line_naming_it(expected, words):
    problems = _thresholds.threshold_problems(expected)
    assert len(problems) == 1 and words in problems[0], problems
    assert problems[0].startswith("aorta_expected_results")


@pytest.mark.parametrize(
    "expected",
    [
        None,
        "",
        {},
        {"min_compute_ratio": 0, "min_overlap_ratio": 1, "max_avg_iteration_ms": "450.5"},
        "min_overlap_ratio=",
    ],
)
def test_good_and_empty_thresholds_have_no_problem(expected):
    assert _thresholds.threshold_problems(expected) == []


def test_checks_pass_and_fail_with_the_reason_and_an_unmeasured_value_fails():
    perf = {"avg_iteration_time_ms": 100.0, "std_iteration_time_us": 0.0, "avg_compute_ratio": 0.5}
    checks = _thresholds.check_thresholds(perf, {"max_avg_iteration_ms": 90, "min_compute_ratio": "0.4"})
    assert [(c["name"], c["passed"]) for c in checks] == [("max_avg_iteration_ms", False), ("min_compute_ratio", True)]
    assert "measured 100 exceeds threshold 90" in checks[0]["reason"]
    (unmeasured,) = _thresholds.check_thresholds(perf, {"min_overlap_ratio": 0.1})
    assert unmeasured["passed"] is False and unmeasured["reason"] == "min_overlap_ratio: no value could be measured"


@pytest.mark.parametrize("limit,passed", [(50, False), (60, True)])
def test_cvs_max_avg_iteration_ms_means_what_it_means_in_cvs(tmp_path, fixtures_dir, limit, passed):
    """CVS's avg_iteration_time_ms is the mean over ranks of each rank's whole profiled window
    (TraceLens' gpu_timeline total_time), not one step's time: the same threshold on the same
    trace gives CVS's verdict."""
    name = "mi300/resnet-act-checkpoint.json.gz"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json.gz").write_bytes((fixtures_dir / "traces" / name).read_bytes())
    report = _report.build_report(str(tmp_path / "t"), expected_results={"max_avg_iteration_ms": limit})
    window = report["per_rank_summary"][0]["total_time_us"] / 1000.0
    assert report["performance"]["avg_iteration_time_ms"] == pytest.approx(window)
    assert window == pytest.approx(56.51760, rel=1e-3)  # TraceLens' total_time for this trace
    (check,) = report["validation"]["checks"]
    assert check["passed"] is passed


def test_cvs_parity_a_zero_limit_is_judged_and_a_variance_over_a_zero_average_is_skipped():
    """CVS accepts max_avg_iteration_ms: 0 (schema ge=0, loader >= 0) and judges it; its gate judges
    the variance ratio only when the average time is above 0."""
    assert _thresholds.threshold_problems({"max_avg_iteration_ms": 0}) == []
    perf = {"avg_iteration_time_ms": 12.5, "std_iteration_time_us": 1.0}
    (zero,) = _thresholds.check_thresholds(perf, {"max_avg_iteration_ms": 0})
    assert zero["passed"] is False and "exceeds threshold 0" in zero["reason"]
    idle = {"avg_iteration_time_ms": 0.0, "std_iteration_time_us": 0.0}
    (variance,) = _thresholds.check_thresholds(idle, {"max_time_variance_ratio": 0.5})
    assert variance["passed"] is True and variance["skipped"] is True
    assert variance["reason"] == (
        "max_time_variance_ratio: not judged: the average iteration time is 0 ms (CVS skips it too)"
    )
    (unmeasured,) = _thresholds.check_thresholds({}, {"max_time_variance_ratio": 0.5})
    assert unmeasured["passed"] is False  # no value at all: not CVS's zero average, still a failure
