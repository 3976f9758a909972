# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's "Why it stopped" section, from the diagnosis of a recorded stand-in hang."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
