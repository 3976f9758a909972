# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's "Why it stopped" section, from the diagnosis of a recorded stand-in hang; the straggler
test on recorded healthy and planted-straggler stand-in traces; the notes on missing plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils import _report
from ansible_collections.aorta.cluster.plugins.plugin_utils._diagnosis import diagnose_run

DATA = Path(__file__).parents[1] / "plugin_utils" / "diagnosis_data"


def test_why_it_stopped_comes_first_with_the_frame_of_the_rank_behind(tmp_path):
    nodes = json.loads((DATA / "hang" / "run.json").read_text())["nodes"]
    trouble = [{"at": 1.0, "kind": "xgmi", "line": "<xgmi> lost"}]
    nodes[0]["node_errors"] = {"source": "dmesg", "error": "", "lines": trouble}
    diagnosis = diagnose_run(str(DATA / "hang"), "TIMEOUT", nodes, 2)
    report = _report.build_report(str(tmp_path))  # no traces: a hang before the profiler exported
    report["diagnosis"] = diagnosis
    html = _report.render_html(report)
    why = html.index("<h2>Why it stopped</h2>")
    assert why < html.index("<h2>Headline</h2>")
    assert diagnosis["behind"][0]["frame"] in html and "gloo:broadcast #5" in html
    assert "&lt;xgmi&gt; lost" in html and "<xgmi>" not in html


def test_a_completed_run_without_trouble_has_no_why_section(tmp_path):
    report = _report.build_report(str(tmp_path))
    report["diagnosis"] = diagnose_run(str(tmp_path), "COMPLETED", [{"name": "n0"}], 1)
    assert "Why it stopped" not in _report.render_html(report)


def test_a_python_without_matplotlib_or_msgspec_is_said_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    monkeypatch.setattr(_report._analysis, "msgspec", None)
    tools = _report.tool_notes()
    assert tools["plots"] is False and tools["fast_decoder"] is False
    report = _report.build_report(str(tmp_path))
    report["tools"] = tools
    html = _report.render_html(report)
    assert "no plots: matplotlib is not installed" in html and "slow decoding: msgspec" in html


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
    slow, _nodes, test = _report.stragglers(ranks, 0.1, evidence)
    # Alone the slowest in 2 of 2 steps among 4 ranks: 4 x (1/4)^2 = 25% by chance alone.
    assert slow == [] and "profile at least 4 steps" in test["verdict"]
    evidence = {r: {"step_compute_ms": [[k, 5.0 * (2 if r == 3 else 1)] for k in range(4)]} for r in range(4)}
    slow, _nodes, test = _report.stragglers(ranks, 0.1, evidence)
    assert [s["rank"] for s in slow] == [3] and slow[0]["p_value_steps"] == pytest.approx(4 * 0.25**4)


def test_baseline_says_regression_for_a_slower_run_and_same_for_an_equal_one(tmp_path, combined_tree):
    healthy = _report.build_report(str(combined_tree(tmp_path / "a", [50, 50, 50, 50], bad_file=False)))
    _report.write_outputs(healthy, str(tmp_path / "then"))
    again = _report.build_report(str(combined_tree(tmp_path / "b", [50, 50, 50, 50], bad_file=False)))
    same = _report.compare_baseline(again, str(tmp_path / "then"))
    assert same["verdict"] == "same" and same["metrics"]["avg_step_time_ms"]["delta_ratio"] == 0
    slower = _report.build_report(
        str(combined_tree(tmp_path / "c", [50, 50, 50, 50], bad_file=False)), straggler_threshold=0.1
    )
    slower["performance"] = dict(
        slower["performance"], avg_step_time_ms=healthy["performance"]["avg_step_time_ms"] * 1.5
    )
    worse = _report.compare_baseline(slower, str(tmp_path / "then" / "aorta_benchmark_report.json"))
    assert worse["verdict"] == "regression" and worse["metrics"]["avg_step_time_ms"]["delta_ratio"] == pytest.approx(
        0.5
    )
    assert "Against the baseline" in _report.render_html(dict(slower, baseline=worse))


def test_baseline_change_inside_the_steps_noise_is_not_a_regression(tmp_path):
    """Recorded stand-in runs on a shared machine: healthy runs differ by up to 25% in iteration
    time with a step-to-step spread as large; that is not called a regression."""
    _report.write_outputs(_report.build_report(str(STRAGGLERS / "ok3")), str(tmp_path / "then"))
    result = _report.compare_baseline(_report.build_report(str(STRAGGLERS / "ok5")), str(tmp_path / "then"))
    assert result["metrics"]["avg_step_time_ms"]["delta_ratio"] > 0.05
    assert result["verdict"] == "within noise" and "within the steps' noise" in result["reason"]


def test_a_bad_baseline_is_named(tmp_path):
    report = _report.build_report(str(tmp_path))
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(_report.ReportError, match=r"aorta_baseline: .*x\.json: not a report"):
        _report.compare_baseline(report, str(tmp_path / "x.json"))


@pytest.mark.parametrize("limit,passed", [(50, False), (60, True)])
def test_cvs_max_avg_iteration_ms_means_what_it_means_in_cvs(tmp_path, shared_dir, limit, passed):
    """CVS's avg_iteration_time_ms is the mean over ranks of each rank's whole profiled window
    (TraceLens' gpu_timeline total_time), not one step's time: the same threshold on the same
    trace gives CVS's verdict."""
    name = "mi300/resnet-act-checkpoint.json.gz"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json.gz").write_bytes((shared_dir / "fixtures" / "traces" / name).read_bytes())
    report = _report.build_report(str(tmp_path / "t"), expected_results={"max_avg_iteration_ms": limit})
    window = report["per_rank_summary"][0]["total_time_us"] / 1000.0
    assert report["performance"]["avg_iteration_time_ms"] == pytest.approx(window)
    assert window == pytest.approx(56.51760, rel=1e-3)  # TraceLens' total_time for this trace
    (check,) = report["validation"]["checks"]
    assert check["passed"] is passed


BASELINES = Path(__file__).parent / "baseline_data"


@pytest.mark.parametrize(
    ("run", "verdict"), [("ok2", "same"), ("ok3", "same"), ("slow1", "regression"), ("slow2", "regression")]
)
def test_against_a_healthy_baseline_a_run_with_a_slow_rank_is_a_regression_and_a_healthy_one_is_not(
    tmp_path, run, verdict
):
    _report.write_outputs(_report.build_report(str(BASELINES / "ok1")), str(tmp_path / "then"))
    now = _report.build_report(str(BASELINES / run))
    result = _report.compare_baseline(now, str(tmp_path / "then"))
    assert result["verdict"] == verdict, result
    if verdict == "regression":
        assert now["stragglers"][0]["rank"] == 2  # and the report says who
