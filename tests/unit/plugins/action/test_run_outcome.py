# SPDX-License-Identifier: GPL-3.0-or-later
"""run_outcome in-process: the verdict printed as one line, the files written, the AWX stats, and
whether the play must fail from the verdict and aorta_fail_on_threshold."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.action import run_outcome
from ansible_collections.aorta.cluster.plugins.action.run_outcome import ActionModule

REPO = Path(__file__).resolve().parents[4]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
NOT_MET = {"name": "max_avg_iteration_ms", "threshold": 1, "value": 33.5, "passed": False, "reason": "exceeds 1"}


def action(check_mode=False):
    task = SimpleNamespace(args={}, async_val=0, check_mode=check_mode, action="aorta.cluster.run_outcome")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    return ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)


def results(tmp_path, checks) -> Path:
    folder = tmp_path / "20261206T080000-aaaaaa"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(dict(SAMPLE, run_id=folder.name)))
    report = {"run": {"run_id": folder.name}, "validation": {"checks": checks}, "performance": {}}
    (folder / "aorta_benchmark_report.json").write_text(json.dumps(report))
    return folder


def test_a_threshold_not_met_is_printed_once_and_fails_the_play_by_default(tmp_path, monkeypatch):
    printed = []
    monkeypatch.setattr(run_outcome.display, "display", printed.append)
    folder = results(tmp_path, [NOT_MET])
    out = action().run(task_vars={"aorta_results_dir_resolved": str(folder)})
    assert not out.get("failed"), out  # the playbook's next task fails, after everything is written
    assert printed == [out["line"]] == ["verdict FAIL: threshold exceeds 1"]
    assert out["fails_play"] is True and out["changed"] is False  # no "changed:" line after the verdict
    assert out["ansible_stats"]["data"]["aorta_verdict"] == "FAIL"
    assert (folder / "junit.xml").is_file() and (tmp_path / "index.html").is_file()
    kept = action().run(task_vars={"aorta_results_dir_resolved": str(folder), "aorta_fail_on_threshold": "false"})
    assert kept["fails_play"] is False and kept["verdict"] == "FAIL"


def test_check_mode_judges_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(run_outcome.display, "display", lambda line: None)
    folder = results(tmp_path, [])
    out = action(check_mode=True).run(task_vars={"aorta_results_dir_resolved": str(folder)})
    assert out["verdict"] == "PASS" and out["changed"] is False and not (folder / "junit.xml").exists()


def test_without_a_results_directory_or_run_json_it_fails_naming_what_is_missing(tmp_path):
    assert "aorta_results_dir_resolved" in action().run(task_vars={})["msg"]
    out = action().run(task_vars={"aorta_results_dir_resolved": str(tmp_path)})
    assert out["failed"] and out["msg"].endswith("no run.json to judge (run_record writes it first)")
