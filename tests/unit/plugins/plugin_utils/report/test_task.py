# SPDX-License-Identifier: GPL-3.0-or-later
"""The trace_parse task: a folder without a trace fails in one line naming it; after a run without
traces the report still says why it stopped."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _task


def _task_of(traces_dir, **extra):
    params = {name: spec.get("default") for name, spec in _task.TASK_ARGUMENT_SPEC.items()}
    params.update(traces_dir=str(traces_dir), report_dir=str(traces_dir), **extra)
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
