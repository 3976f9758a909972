# SPDX-License-Identifier: GPL-3.0-or-later
"""The one verdict: PASS only when the run completed and every judged threshold holds; findings never
change it; the console line stays under its limit."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import verdict, verdict_line

MET = {"name": "min_compute_ratio", "passed": True, "reason": "min_compute_ratio: measured 0.5 within threshold 0.01"}
NOT_MET = {"name": "max_avg_iteration_ms", "passed": False, "reason": "max_avg_iteration_ms: measured 33.5 exceeds 1"}


def test_a_completed_run_whose_thresholds_hold_passes_and_says_how_many():
    found = verdict("COMPLETED", "all 3 nodes completed", [MET, dict(MET, name="x")], report_made=True)
    assert found == {"verdict": "PASS", "reasons": [], "notes": ["2 of 2 thresholds met"]}
    assert verdict_line(found) == "verdict PASS: 2 of 2 thresholds met"


def test_a_threshold_not_met_fails_with_its_reason():
    found = verdict("COMPLETED", "all 3 nodes completed", [MET, NOT_MET], report_made=True)
    assert found["verdict"] == "FAIL"
    assert found["reasons"] == [f"threshold {NOT_MET['reason']}"]
    assert verdict_line(found) == f"verdict FAIL: threshold {NOT_MET['reason']}"


def test_a_run_that_did_not_complete_fails_first_with_its_status_then_each_threshold():
    found = verdict("FAILED", "node n1 exited 1", [NOT_MET], report_made=True)
    assert found["reasons"] == ["FAILED: node n1 exited 1", f"threshold {NOT_MET['reason']}"]
    assert verdict_line(found) == "verdict FAIL: FAILED: node n1 exited 1 (+1 more in run.json)"
    # run.json's message starts with the status already: said once.
    assert verdict("FAILED", "FAILED on 3 of 3 nodes", [], report_made=True)["reasons"] == ["FAILED on 3 of 3 nodes"]


def test_a_report_of_no_trace_judges_no_threshold():
    """A run stopped before its profiler wrote: its checks all say 'no value', which is not a reason."""
    found = verdict("FAILED", "FAILED on 3 of 3 nodes", [NOT_MET], report_made=False)
    assert found["reasons"] == ["FAILED on 3 of 3 nodes"]
    assert found["notes"] == ["thresholds not judged: no trace was analysed"]


def test_without_a_report_the_status_alone_decides_and_the_note_says_thresholds_were_not_judged():
    assert verdict("COMPLETED", "ok", None, report_made=False) == {
        "verdict": "PASS",
        "reasons": [],
        "notes": ["thresholds not judged: no trace was analysed"],
    }
    assert verdict("TIMEOUT", "", None, report_made=False)["reasons"] == ["TIMEOUT"]


def test_a_folder_of_traces_has_no_status_and_is_judged_by_its_thresholds():
    found = verdict(None, None, [MET], report_made=True)
    assert found["verdict"] == "PASS" and "no run record" in found["notes"][-1]
    assert verdict(None, None, [], report_made=True)["notes"][0] == "no threshold set"


def test_the_line_stays_under_its_limit_whatever_the_message():
    found = verdict("FAILED", "x" * 5000, [NOT_MET], report_made=True)
    line = verdict_line(found)
    assert len(line) <= 300 and line.endswith("(+1 more in run.json)") and "…" in line
