# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's end written where people and CI look: the verdict into run.json, junit.xml beside it, the
history in the results root; the play's exit from the verdict and aorta_fail_on_threshold."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _outcome

REPO = Path(__file__).resolve().parents[5]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
MET = {"name": "min_compute_ratio", "threshold": 0.01, "value": 0.5, "passed": True, "reason": "met"}
NOT_MET = {"name": "max_avg_iteration_ms", "threshold": 1, "value": 33.5, "passed": False, "reason": "exceeds 1"}


def results(tmp_path, run_id="20261206T080000-aaaaaa", status="COMPLETED", checks=None) -> Path:
    """A run's results directory under ``tmp_path`` (the results root): run.json and, with ``checks``,
    its report."""
    folder = tmp_path / run_id
    folder.mkdir()
    run = dict(SAMPLE, run_id=run_id, status=status)
    run.pop("verdict", None)
    (folder / "run.json").write_text(json.dumps(run))
    if checks is not None:
        report = {
            "run": {"run_id": run_id},
            "performance": {"avg_step_time_ms": 10.0},
            "validation": {"passed": all(c["passed"] for c in checks), "checks": checks},
            "slow_nodes": [],
            "stragglers": [],
        }
        (folder / "aorta_benchmark_report.json").write_text(json.dumps(report))
    return folder


def test_a_healthy_run_passes_and_leaves_its_verdict_junit_and_history(tmp_path):
    folder = results(tmp_path, checks=[MET])
    found = _outcome.finish(str(folder))
    assert found["verdict"] == "PASS" and found["line"] == "verdict PASS: 1 of 1 thresholds met"
    assert json.loads((folder / "run.json").read_text())["verdict"]["verdict"] == "PASS"
    suite = ET.parse(folder / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    index = json.loads((tmp_path / "index.json").read_text())
    assert [row["run_id"] for row in index["runs"]] == [folder.name]
    assert (tmp_path / "index.html").is_file()
    assert _outcome.fails_play(found, fail_on_threshold=True) is False


def test_a_threshold_not_met_fails_the_verdict_and_the_play_unless_told_not_to(tmp_path):
    found = _outcome.finish(str(results(tmp_path, checks=[MET, NOT_MET])))
    assert found["verdict"] == "FAIL" and found["thresholds_failed"]
    assert found["line"] == "verdict FAIL: threshold exceeds 1"
    assert _outcome.fails_play(found, fail_on_threshold=True) is True
    assert _outcome.fails_play(found, fail_on_threshold=False) is False


def test_a_run_that_did_not_complete_always_fails_the_play(tmp_path):
    found = _outcome.finish(str(results(tmp_path, status="FAILED")))
    assert found["verdict"] == "FAIL" and found["reasons"][0].startswith("FAILED: ")
    assert _outcome.fails_play(found, fail_on_threshold=False) is True


def test_another_runs_report_in_a_reused_directory_is_not_taken_for_this_runs(tmp_path):
    folder = results(tmp_path, checks=[NOT_MET])
    report = json.loads((folder / "aorta_benchmark_report.json").read_text())
    report["run"]["run_id"] = "20261201T000000-bbbbbb"
    (folder / "aorta_benchmark_report.json").write_text(json.dumps(report))
    found = _outcome.finish(str(folder))
    assert found["verdict"] == "PASS" and found["notes"] == ["thresholds not judged: no trace was analysed"]


def test_check_mode_writes_nothing(tmp_path):
    folder = results(tmp_path, checks=[MET])
    before = (folder / "run.json").read_text()
    assert _outcome.finish(str(folder), write=False)["verdict"] == "PASS"
    assert (folder / "run.json").read_text() == before
    assert not (folder / "junit.xml").exists() and not (tmp_path / "index.json").exists()


def test_no_run_json_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(_outcome.OutcomeError, match=r"run\.json: no run\.json to judge"):
        _outcome.finish(str(tmp_path))


def test_the_awx_stats_carry_the_verdict_and_where_junit_is(tmp_path):
    found = _outcome.finish(str(results(tmp_path, checks=[NOT_MET])))
    stats = _outcome.awx_stats(found)
    assert stats["per_host"] is False and stats["aggregate"] is True
    assert stats["data"]["aorta_verdict"] == "FAIL" and stats["data"]["aorta_junit"].endswith("junit.xml")
    assert stats["data"]["aorta_history"].endswith("index.html")
