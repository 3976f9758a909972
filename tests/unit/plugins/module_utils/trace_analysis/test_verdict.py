# SPDX-License-Identifier: GPL-3.0-or-later
"""The one verdict: PASS only when the run completed, every judged threshold holds and nothing was
found (a finding the user ignores stays a note); the exit rule; the console line stays under its limit."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import KINDS
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import (
    fails_exit,
    verdict,
    verdict_line,
)

MET = {"name": "min_compute_ratio", "passed": True, "reason": "min_compute_ratio: measured 0.5 within threshold 0.01"}
NOT_MET = {"name": "max_avg_iteration_ms", "passed": False, "reason": "max_avg_iteration_ms: measured 33.5 exceeds 1"}


def test_a_completed_run_whose_thresholds_hold_passes_and_says_how_many():
    found = verdict("COMPLETED", "all 3 nodes completed", [MET, dict(MET, name="x")], report_made=True)
    assert found == {
        "verdict": "PASS",
        "reasons": [],
        "notes": ["2 of 2 thresholds met"],
        "findings": [],
        "ignored": [],
    }
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
        "findings": [],
        "ignored": [],
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


LINK = "10.0.0.3: fabric 0.19 Gbit/s sent against a median of 3.8 Gbit/s (0.05x)"


def test_a_finding_fails_a_completed_run_whose_thresholds_hold_naming_what_was_found():
    found = verdict("COMPLETED", "ok", [MET], True, {"slow_link": [LINK], "drift": []})
    assert found["verdict"] == "FAIL" and found["findings"] == ["slow_link"] and found["ignored"] == []
    assert found["reasons"] == [f"slow link: {LINK}"]
    assert found["notes"] == ["1 of 1 thresholds met"]
    assert verdict_line(found) == f"verdict FAIL: slow link: {LINK}"


def test_many_lines_of_one_kind_are_one_reason_with_a_count_at_any_node_count():
    lines = [f"node n{i}: compute +30% over the median node" for i in range(1000)]
    found = verdict("COMPLETED", "ok", [], True, {"slow_node": lines})
    assert found["reasons"] == [f"slow node: {lines[0]} (+999 more)"]


def test_an_ignored_kind_is_a_note_and_the_run_passes():
    found = verdict("COMPLETED", "ok", [MET], True, {"slow_link": [LINK], "straggler": []}, ignores=["slow_link"])
    assert found["verdict"] == "PASS" and found["findings"] == [] and found["ignored"] == ["slow_link"]
    assert found["notes"] == ["1 of 1 thresholds met", f"slow link: {LINK}: ignored (aorta_verdict_ignores)"]
    # Ignoring a kind that was not found says nothing; the others still fail.
    other = verdict("COMPLETED", "ok", [], True, {"slow_link": [LINK], "drift": ["amdgpu: 1 of 3"]}, ["drift", "x"])
    assert other["findings"] == ["slow_link"] and other["ignored"] == ["drift"]


def test_reasons_come_status_then_thresholds_then_findings_in_the_kinds_order():
    found = verdict(
        "FAILED",
        "FAILED on 1 of 2 nodes",
        [NOT_MET],
        True,
        {"baseline_regression": ["regression against x"], "slow_node": ["node a"]},
    )
    assert found["reasons"] == [
        "FAILED on 1 of 2 nodes",
        f"threshold {NOT_MET['reason']}",
        "slow node: node a",
        "regression against x",
    ]
    assert list(KINDS) == ["slow_node", "straggler", "slow_link", "drift", "link_errors", "baseline_regression"]


@pytest.mark.parametrize(
    ("found", "fail_on_threshold", "fails"),
    [
        (verdict("COMPLETED", "ok", [MET], True), True, False),
        (verdict("COMPLETED", "ok", [NOT_MET], True), True, True),
        # aorta_fail_on_threshold false: a threshold alone keeps the exit at 0 ...
        (verdict("COMPLETED", "ok", [NOT_MET], True), False, False),
        # ... a finding or a status never.
        (verdict("COMPLETED", "ok", [NOT_MET], True, {"slow_link": [LINK]}), False, True),
        (verdict("FAILED", "FAILED on 1 of 2 nodes", [], True), False, True),
        (verdict("COMPLETED", "ok", [], True, {"slow_link": [LINK]}, ["slow_link"]), True, False),
        # run.json of an earlier version: no "findings", thresholds only.
        ({"verdict": "FAIL", "reasons": ["threshold x"]}, False, False),
    ],
)
def test_the_exit_rule(found, fail_on_threshold, fails):
    assert fails_exit(found, fail_on_threshold) is fails
