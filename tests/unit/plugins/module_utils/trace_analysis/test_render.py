# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html: "Why it stopped" comes first, from the diagnosis of a recorded stand-in hang, and is
absent when nothing went wrong."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _render, _report
from ansible_collections.aorta.cluster.plugins.plugin_utils._diagnosis import diagnose_run

DATA = Path(__file__).parents[2] / "plugin_utils" / "diagnosis_data"


def test_why_it_stopped_comes_first_with_the_frame_of_the_rank_behind(tmp_path):
    nodes = json.loads((DATA / "hang" / "run.json").read_text())["nodes"]
    trouble = [{"at": 1.0, "kind": "xgmi", "line": "<xgmi> lost"}]
    nodes[0]["node_errors"] = {"source": "dmesg", "error": "", "lines": trouble}
    diagnosis = diagnose_run(str(DATA / "hang"), "TIMEOUT", nodes, 2)
    report = _report.build_report(str(tmp_path))  # no traces: a hang before the profiler exported
    report["diagnosis"] = diagnosis
    html = _render.render_html(report)
    why = html.index("<h2>Why it stopped</h2>")
    assert why < html.index("<h2 id='headline'>Headline</h2>")
    assert diagnosis["behind"][0]["frame"] in html and "gloo:broadcast #5" in html
    assert "&lt;xgmi&gt; lost" in html and "<xgmi>" not in html


def test_a_completed_run_without_trouble_has_no_why_section(tmp_path):
    report = _report.build_report(str(tmp_path))
    report["diagnosis"] = diagnose_run(str(tmp_path), "COMPLETED", [{"name": "n0"}], 1)
    assert "Why it stopped" not in _render.render_html(report)


def test_above_a_few_hundred_ranks_the_page_keeps_the_slowest_and_the_csv_has_every_rank(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    row = report["per_rank_summary"][0]
    report["per_rank_summary"] = [
        dict(row, rank=r, compute_per_iteration_ms=float(r), file=f"rank{r}.json") for r in range(300)
    ]
    report["unranked_traces"] = [dict(row, rank=None, file="single.json")]
    html = _render.render_html(report)
    table = html[html.index("id='per-rank'") :]
    assert "The 256 of 300 ranks that compute longest" in table
    assert "rank299.json" in table and "rank43.json" not in table and "rank44.json" in table
    assert "(no rank)" in table and "single.json" in table
    paths = _render.write_outputs(report, str(tmp_path / "out"))
    lines = (tmp_path / "out" / "per_rank.csv").read_text().splitlines()
    assert len(lines) == 1 + 300 + 1 and lines[-1].startswith(",")
    assert paths["csv"].endswith("per_rank.csv")
