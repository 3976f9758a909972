# SPDX-License-Identifier: GPL-3.0-or-later
"""trace_parse runs in the controller's own Python, whatever the hosts' interpreter says: with
ansible_python_interpreter pointing at a Python without msgspec, the report is decoded fast."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def test_the_report_is_made_by_the_controllers_python_with_its_fast_decoder(play, tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 90, 50], bad_file=False)
    bare = shutil.which("python3", path="/usr/bin")  # the system Python: no msgspec
    task = {"traces_dir": str(root), "report_dir": str(tmp_path / "out")}
    _rc, out = play({"aorta.cluster.trace_parse": task}, {"ansible_python_interpreter": bare})
    assert not out.get("failed"), out
    # ansible-playbook's own Python (this venv's), not the interpreter the hosts were given.
    assert Path(out["tools"]["python"]).parent == Path(sys.executable).parent != Path(bare).parent
    assert out["tools"]["fast_decoder"] is True and out["tools"]["notes"] == []
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("<svg") == 5 and "id='rank-bars'" in html
    assert json.loads((tmp_path / "out" / "aorta_benchmark_report.json").read_text())["status"] == "completed"


def test_a_run_against_itself_as_baseline_is_the_same(play, tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    first = {"traces_dir": str(root), "report_dir": str(tmp_path / "then")}
    _rc, out = play({"aorta.cluster.trace_parse": first})
    assert not out.get("failed"), out
    again = dict(first, report_dir=str(tmp_path / "now"), baseline=str(tmp_path / "then"))
    _rc, out = play({"aorta.cluster.trace_parse": again})
    assert out["baseline"]["verdict"] == "same" and out["baseline"]["source"].endswith("aorta_benchmark_report.json")
    _rc, bad = play({"aorta.cluster.trace_parse": dict(again, baseline=str(tmp_path / "nowhere"))})
    assert bad["failed"] and bad["msg"].startswith("aorta_baseline: ")
