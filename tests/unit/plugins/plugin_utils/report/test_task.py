# SPDX-License-Identifier: GPL-3.0-or-later
"""The trace_parse task: a folder without a trace fails in one line naming it; after a run without
traces the report still says why it stopped."""

from __future__ import annotations

import json

from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _task


def _task_of(traces_dir, **extra):
    params = {name: spec.get("default") for name, spec in _task.TASK_ARGUMENT_SPEC.items()}
    params.update({"traces_dir": str(traces_dir), "report_dir": str(traces_dir), **extra})
    return _task.run_task(params)


def test_an_empty_folder_or_one_without_a_trace_fails_with_one_line_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    result, failure = _task_of(tmp_path / "empty")
    assert failure == f"aorta_traces_dir: no trace found in {tmp_path / 'empty'} (no *.json or *.json.gz file)"
    assert not (tmp_path / "empty" / "report.html").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "rank0.json").write_text('{"a": 1}')
    result, failure = _task_of(tmp_path / "other")
    assert failure.startswith(f"aorta_traces_dir: no trace found in {tmp_path / 'other'} (1 JSON file(s) that are")
    assert result["skipped_files"][0]["file"] == str(tmp_path / "other" / "rank0.json")


def test_after_a_run_without_traces_the_report_still_says_why_it_stopped(tmp_path):
    (tmp_path / "t").mkdir()
    result, failure = _task_of(tmp_path / "t", diagnosis={"summary": "TIMEOUT: rank 3 behind", "kind": "hang"})
    assert failure == ""
    assert "no trace found" in (tmp_path / "t" / "report.html").read_text()
    assert result["status"] == "failed"


def test_on_a_folder_of_traces_the_task_exits_by_the_one_exit_rule(tmp_path, combined_tree):
    """trace_report.yml on a failed run's traces (its run.json beside them): the verdict fails on
    the run's status, and so does the task, naming it; after a run (fail_on_verdict false) the task
    leaves the exit to run_outcome."""
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    run = {"run_id": "r1", "status": "FAILED", "message": "FAILED on 1 of 2 nodes"}
    (root.parent / "run.json").write_text(json.dumps(run))
    result, failure = _task_of(root, report_dir=str(tmp_path / "out"), fail_on_verdict=True)
    assert result["verdict"]["reasons"][0] == "FAILED on 1 of 2 nodes" and failure == "FAILED on 1 of 2 nodes"
    _result, failure = _task_of(root, report_dir=str(tmp_path / "after"), fail_on_verdict=False)
    assert failure == ""
