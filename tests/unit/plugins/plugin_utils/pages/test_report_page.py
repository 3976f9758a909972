# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's model: "Why it stopped" comes first, from the diagnosis of a recorded stand-in hang,
and is absent when nothing went wrong; the collectives table against the fabric."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _stragglers
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._diagnosis import diagnose_run

DATA = Path(__file__).parents[2] / "plugin_utils" / "results" / "diagnosis_data"


def test_why_it_stopped_comes_first_with_the_frame_of_the_rank_behind(tmp_path):
    nodes = json.loads((DATA / "hang" / "run.json").read_text())["nodes"]
    trouble = [{"at": 1.0, "kind": "xgmi", "line": "<xgmi> lost"}]
    nodes[0]["node_errors"] = {"source": "dmesg", "error": "", "lines": trouble}
    diagnosis = diagnose_run(str(DATA / "hang"), "TIMEOUT", nodes, 2)
    report = _report.build_report(str(tmp_path))  # no traces: a hang before the profiler exported
    report["diagnosis"] = diagnosis
    html = _report_page.render_html(report)
    why = html.index("<h2>Why it stopped</h2>")
    assert why < html.index("<h2 id='headline'>Headline</h2>")
    assert diagnosis["behind"][0]["frame"] in html and "gloo:broadcast #5" in html
    assert "&lt;xgmi&gt; lost" in html and "<xgmi>" not in html


def test_a_completed_run_without_trouble_has_no_why_section(tmp_path):
    report = _report.build_report(str(tmp_path))
    report["diagnosis"] = diagnose_run(str(tmp_path), "COMPLETED", [{"name": "n0"}], 1)
    assert "Why it stopped" not in _report_page.render_html(report)


def _sweep(**extra) -> dict:
    """The report's ``fabric_sweep`` of a sweep that ran on 3 nodes and named nobody."""
    found = {"ran": True, "tool": "tcp", "seconds": 10.0, "threshold": 0.5, "min_gbps": None, "median_gbps": 3.812}
    found |= {"localisable": True, "reason": None, "rounds": 3, "slow_count": 0}
    return found | {"unresolved_count": 0, "not_measured_count": 0} | extra


def test_the_collectives_table_gives_each_busbw_against_the_fabric_blank_without_a_sweep(tmp_path, fixtures_dir):
    (tmp_path / "t").mkdir()
    shutil.copy(fixtures_dir / "traces" / "nccl" / "nccl-data.json.gz", tmp_path / "t" / "trace.json.gz")
    report = _report.build_report(str(tmp_path / "t"), include_unlinked_kernels=True)
    table = _report_page.page_model(report)["collectives"]
    assert table["head"][-2:] == ["busbw (GB/s)", "of fabric"]
    assert {row[-1] for row in table["rows"]} == {""}
    assert "of fabric is\nblank: no fabric sweep measured the links" in _report_page.render_html(report)
    report["fabric_sweep"] = _sweep(median_gbps=25.0)
    table = _report_page.page_model(report)["collectives"]
    for row, c in zip(table["rows"], report["collective_table"]):
        assert row[-1] == _stragglers.times(c["busbw_gbps"] * 8 / 25.0)
    assert table["rows"][0][-2:] == ["2.080", "0.67x"]  # the 7.8 MiB all-reduce: 2.08 GB/s = 16.6 Gbit/s
    report["fabric_sweep"] = {"ran": False, "why": "off"}
    assert {row[-1] for row in _report_page.page_model(report)["collectives"]["rows"]} == {""}
