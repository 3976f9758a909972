# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's files: one word for one figure (step, CVS iteration) in per_rank.csv, the JSON and
the page; every rank in the CSV above the page's limit."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _opening, _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report


def test_above_a_few_hundred_ranks_the_page_keeps_the_slowest_and_the_csv_has_every_rank(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    row = report["per_rank_summary"][0]
    report["per_rank_summary"] = [
        dict(row, rank=r, compute_per_iteration_ms=float(r), file=f"rank{r}.json") for r in range(300)
    ]
    report["unranked_traces"] = [dict(row, rank=None, file="single.json")]
    html = _report_page.render_html(report)
    table = html[html.index("id='per-rank'") :]
    assert "The 256 of 300 ranks that compute longest" in table
    assert "rank299.json" in table and "rank43.json" not in table and "rank44.json" in table
    assert "(no rank)" in table and "single.json" in table
    paths = _outputs.write_outputs(report, str(tmp_path / "out"))
    lines = (tmp_path / "out" / "per_rank.csv").read_text().splitlines()
    assert len(lines) == 1 + 300 + 1 and lines[-1].startswith(",")
    assert paths["csv"].endswith("per_rank.csv")


def _opening_of(report: dict) -> dict:
    return {row["id"]: row for row in _opening.opening_rows(report)}


def test_step_and_cvs_iteration_are_two_words_for_two_figures_in_the_csv_the_json_and_the_page(tmp_path, combined_tree):
    """A step is one ProfilerStep#N (100 ms here); the CVS iteration is a rank's whole profiled window
    (4 steps: 400 ms). per_rank.csv's step column is step_time_ms; the JSON's iteration_time_ms is
    the same per-step value, a deprecated alias."""
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    paths = _outputs.write_outputs(report, str(tmp_path / "out"))
    rows = list(csv.DictReader(io.StringIO(Path(paths["csv"]).read_text())))
    assert [float(r["step_time_ms"]) for r in rows] == [100.0] * 4
    assert [float(r["total_time_us"]) for r in rows] == [400_000.0] * 4
    assert "iteration_time_ms" not in rows[0] and float(rows[0]["compute_per_step_ms"]) == 50.0
    written = json.loads(Path(paths["report"]).read_text())
    assert written["performance"]["avg_iteration_time_ms"] == 400.0  # CVS's key and meaning, kept
    for row in written["per_rank_summary"]:
        assert row["step_time_ms"] == row["iteration_time_ms"] == 100.0
    step_row = _opening_of(report)["step-time"]["text"]
    assert (
        step_row.startswith("100.000 ms per step") and "CVS iteration" in step_row and "4 steps): 400.000" in step_row
    )
    html = Path(paths["html"]).read_text()
    headline = html[html.index("id='headline'") : html.index("id='views'")]
    assert "<th>step (ms)</th>" in headline and "<th>CVS iteration: profiled window (ms)</th>" in headline
    assert "per iteration" not in html and "/iter" not in html


def test_a_row_with_only_the_older_key_still_fills_the_step_column(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50], bad_file=False)))
    for row in report["per_rank_summary"]:
        del row["step_time_ms"]  # a summary made before the rename
    _outputs.write_outputs(report, str(tmp_path / "out"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "per_rank.csv").read_text())))
    assert [float(r["step_time_ms"]) for r in rows] == [100.0, 100.0]
