# SPDX-License-Identifier: GPL-3.0-or-later
"""What the report is judged by: thresholds merged over CVS's defaults key by key, and the baseline
found by itself (auto) or named, with why."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _judging

REPO = Path(__file__).resolve().parents[5]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


def test_one_threshold_given_changes_that_one_and_keeps_the_other_three():
    merged = _judging.thresholds({"max_avg_iteration_ms": 1})
    assert merged == dict(DEFAULTS["aorta_expected_results"], max_avg_iteration_ms=1)
    assert len(merged) == 4


def test_a_threshold_given_empty_or_null_is_turned_off_and_an_unknown_key_stays_to_be_refused():
    merged = _judging.thresholds({"min_compute_ratio": "", "min_overlap_ratio": None, "max_iteration": 5})
    assert merged["min_compute_ratio"] is None and merged["min_overlap_ratio"] is None
    assert merged["max_iteration"] == 5
    assert _judging.thresholds(None) == DEFAULTS["aorta_expected_results"]


def run_dir(root: Path, run_id: str, epoch: int, image_id: str, report: bool = True) -> Path:
    folder = root / run_id
    folder.mkdir(parents=True)
    context = dict(SAMPLE["context"], image_id=image_id)
    run = dict(SAMPLE, run_id=run_id, started_epoch=epoch, context=context)
    (folder / "run.json").write_text(json.dumps(run))
    if report:
        (folder / "aorta_benchmark_report.json").write_text(json.dumps({"performance": {"avg_step_time_ms": 1.0}}))
    return folder


def test_auto_takes_the_newest_comparable_run_and_says_why(tmp_path):
    older = run_dir(tmp_path, "20261201T000000-aaaaaa", 100, "sha256:one")
    newer = run_dir(tmp_path, "20261202T000000-bbbbbb", 200, "sha256:one")
    now = run_dir(tmp_path, "20261203T000000-cccccc", 300, "sha256:one", report=False)
    found = _judging.baseline("auto", str(now))
    assert found["baseline"] == str(newer) != str(older)
    assert newer.name in found["baseline_context"]["chosen"]


def test_auto_with_no_comparable_run_says_not_compared_and_what_differs(tmp_path):
    run_dir(tmp_path, "20261201T000000-aaaaaa", 100, "sha256:" + "1" * 64)
    now = run_dir(tmp_path, "20261203T000000-cccccc", 300, "sha256:" + "2" * 64, report=False)
    found = _judging.baseline("auto", str(now))
    assert found["baseline"] is None
    reason = found["baseline_context"]["reason"]
    assert reason.startswith("no comparable run") and "image" in reason


def test_a_named_baseline_with_another_fingerprint_is_compared_with_its_differences_listed(tmp_path):
    then = run_dir(tmp_path, "20261201T000000-aaaaaa", 100, "sha256:" + "1" * 64)
    now = run_dir(tmp_path, "20261203T000000-cccccc", 300, "sha256:" + "2" * 64, report=False)
    found = _judging.baseline(str(then), str(now))
    assert "baseline" not in found  # the named one stays
    assert found["baseline_context"]["chosen"] == "named by aorta_baseline"
    assert any("image" in line for line in found["baseline_context"]["differences"])


def test_no_baseline_asked_for_gives_nothing_and_auto_on_a_folder_of_traces_says_why(tmp_path):
    assert _judging.baseline("", str(tmp_path)) == {}
    found = _judging.baseline("auto", str(tmp_path / "traces"))
    assert found["baseline"] is None and "run.json" in found["baseline_context"]["reason"]


def test_a_report_of_a_runs_combined_traces_belongs_to_that_run(tmp_path):
    run = tmp_path / "run-1"
    (run / "combined_traces").mkdir(parents=True)
    elsewhere = tmp_path / "report-elsewhere"
    elsewhere.mkdir()
    traces = str(run / "combined_traces")
    # The report's own folder first; else the run whose combined_traces they are; else none.
    assert _judging.run_dir_of(str(elsewhere), traces) == str(elsewhere)
    (run / "run.json").write_text("{}")
    assert _judging.run_dir_of(str(elsewhere), traces + "/") == str(run)
    (elsewhere / "run.json").write_text("{}")
    assert _judging.run_dir_of(str(elsewhere), traces) == str(elsewhere)
    assert _judging.run_dir_of("", "") == ""
