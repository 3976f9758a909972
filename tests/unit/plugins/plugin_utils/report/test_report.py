# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's own parts: ranks from distributedInfo, collectives' bus bandwidth, top kernels, what
the controller's Python lacks (fast decoding), the nodes that analysed their own traces."""

from __future__ import annotations

import gzip
import json

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _decode
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _opening, _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report, _task


def test_a_python_without_msgspec_is_said_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(_decode, "msgspec", None)
    tools = _task.tool_notes()
    assert tools["fast_decoder"] is False
    report = _report.build_report(str(tmp_path))
    report["tools"] = tools
    html = _report_page.render_html(report)
    assert "slow decoding: msgspec" in html and "matplotlib" not in html


@pytest.mark.parametrize(("prefix", "world"), [("dlrm-rank", 8), ("sampled-rank", 128)])
def test_each_multi_rank_set_is_ranked_from_its_distributed_info(tmp_path, fixtures_dir, prefix, world):
    """The files are renamed so that their names disagree with their ranks: the rank is the trace's own."""
    sources = sorted((fixtures_dir / "traces" / "set2").glob(f"{prefix}*.json.gz"))
    folder = tmp_path / "traces"
    folder.mkdir()
    for i, source in enumerate(reversed(sources)):
        (folder / f"trace-{i}.json.gz").write_bytes(source.read_bytes())
    report = _report.build_report(str(folder))
    ranks = {row["rank"]: row["file"] for row in report["per_rank_summary"]}
    own = {}
    for i, source in enumerate(reversed(sources)):
        info = json.loads(gzip.decompress(source.read_bytes()))["distributedInfo"]
        assert info["world_size"] == world
        own[info["rank"]] = f"trace-{i}.json.gz"
    assert ranks == own and len(ranks) == len(sources)
    assert report["missing_ranks"] == [r for r in range(world) if r not in own]


def _task_of(traces_dir, **extra):
    params = {name: spec.get("default") for name, spec in _task.TASK_ARGUMENT_SPEC.items()}
    params.update(traces_dir=str(traces_dir), report_dir=str(traces_dir), **extra)
    return _task.run_task(params)


def test_a_json_without_trace_events_is_skipped_and_named_not_taken_for_a_rank(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    (root / "node_0" / "notes.json").write_text('{"a": 1}')
    report = _report.build_report(str(root))
    assert [r["rank"] for r in report["per_rank_summary"]] == [0, 1, 2, 3]
    assert report["skipped_files"] == [
        {
            "file": str(root / "node_0" / "notes.json"),
            "reason": f"{root / 'node_0' / 'notes.json'}: not a profiler trace (no traceEvents), skipped",
        }
    ]
    assert report["errors"] == [] and report["status"] == "completed"


def test_traces_of_two_runs_are_warned_naming_both_world_sizes_and_missing_ranks_read_as_ranges(
    tmp_path, combined_tree
):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    other = combined_tree(tmp_path / "b", [50] * 300, ranks_per_node=150, bad_file=False, drop=range(2, 300))
    for path in other.rglob("trace.json.gz"):
        target = root / "node_9" / path.relative_to(other / path.relative_to(other).parts[0])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    report = _report.build_report(str(root))
    assert report["warnings"] == ["traces of more than one run: world size 4 (4 traces) and 300 (2 traces)"]
    assert report["missing_ranks"] == list(range(4, 300))
    html = _report_page.render_html(report)
    assert "Warning: traces of more than one run: world size 4 (4 traces) and 300 (2 traces)" in html
    assert "Missing ranks: 4-299" in html


def test_aortas_pair_is_analysed_once_and_said_once(tmp_path, combined_tree):
    """profiling.tensorboard and chrome_trace both on: each rank directory holds the same window as
    <host>_<pid>.<ns>.pt.trace.json and trace.json. Each rank counts once; the copy is not analysed."""
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    for trace in sorted(root.rglob("trace.json.gz")):
        (trace.parent / f"host-a_{4000 + len(trace.parent.name)}.1758927066581847260.pt.trace.json").write_bytes(
            gzip.decompress(trace.read_bytes())
        )
    report = _report.build_report(str(root), max_workers=1)
    assert [r["rank"] for r in report["per_rank_summary"]] == [0, 1, 2, 3]
    assert all(r["file"].endswith("trace.json.gz") for r in report["per_rank_summary"])
    assert len(report["paired_files"]) == 4 and report["duplicate_rank_files"] == []
    assert report["errors"] == [] and report["status"] == "completed"
    html = _report_page.render_html(report)
    assert html.count("written twice by Aorta") == 1 and "4 rank profile(s)" in html


def test_collective_bandwidths_are_nccl_tests_formulas_on_a_real_nccl_trace(tmp_path, fixtures_dir):
    """From the raw events, by hand: per (collective, bytes, group) the mean kernel time, algbw =
    size / time, busbw = algbw x 2(n-1)/n for all_reduce and x 1 for broadcast (nccl-tests)."""
    source = fixtures_dir / "traces" / "nccl" / "nccl-data.json.gz"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json.gz").write_bytes(source.read_bytes())
    report = _report.build_report(str(tmp_path / "t"), include_unlinked_kernels=True)
    events = json.loads(gzip.decompress(source.read_bytes()))["traceEvents"]
    sizes = {"Float": 4, "Long": 8}
    expected: dict = {}
    for e in events:
        if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower():
            a = e["args"]
            key = (a["Collective name"], max(a["In msg nelems"], a["Out msg nelems"]) * sizes[a["dtype"]])
            calls = expected.setdefault(key, [])
            calls.append(e["dur"])
    table = {(r["op"], r["size_bytes"]): r for r in report["collective_table"]}
    assert set(table) == set(expected)
    for (op, size), durations in expected.items():
        mean_s = sum(durations) / len(durations) / 1e6
        row = table[(op, size)]
        assert row["count"] == len(durations) and row["group_size"] == 2
        assert row["algbw_gbps"] == pytest.approx(size / mean_s / 1e9, rel=1e-9)
        factor = {"allreduce": 2 * (2 - 1) / 2, "broadcast": 1.0}[op]
        assert row["busbw_gbps"] == pytest.approx(size / mean_s / 1e9 * factor, rel=1e-9)
    assert _report.bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert _report.bus_factor("_allgather_base", 8) == pytest.approx(7 / 8)
    assert _report.bus_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert _report.bus_factor("reduce_scatter_tensor_coalesced", 4) == pytest.approx(3 / 4)
    assert _report.bus_factor("mystery", 4) is None and _report.bus_factor("allreduce", None) is None
    html = _report_page.render_html(report)
    assert "id='collectives'" in html and "id='top-kernels'" in html and "id='kernel-categories'" in html


def test_top_kernels_sum_every_rank_and_their_shares_add_up(tmp_path, fixtures_dir):
    source = fixtures_dir / "traces" / "mi300" / "bert-small.json.gz"
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json.gz").write_bytes(source.read_bytes())
    report = _report.build_report(str(tmp_path / "t"), include_unlinked_kernels=True)
    events = json.loads(gzip.decompress(source.read_bytes()))["traceEvents"]
    totals: dict = {}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memset"):
            totals.setdefault(e["name"], []).append(e["dur"])
    first = report["top_kernels"][0]
    name, durations = max(totals.items(), key=lambda item: sum(item[1]))
    assert first["name"] == name and first["count"] == len(durations)
    assert first["total_ms"] == pytest.approx(sum(durations) / 1000.0, rel=1e-6)
    assert 0 < sum(k["share"] for k in report["top_kernels"]) <= 1.0 + 1e-9


def test_the_report_says_whose_traces_it_holds_in_full_and_whose_only_as_summaries(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 90], bad_file=False)
    report = _report.build_report(str(root))
    assert (report["traces_in_full"], report["summaries_only"]) == (["gpu-a", "gpu-b"], [])
    assert _opening_text(report) == "in full here: 2 nodes (gpu-a, gpu-b)"
    # aorta_parse_on_nodes with the collection on: one node's traces arrived, the other's did not.
    summaries = [
        dict(_analysis.analyse(path), node=f"gpu-{'ab'[i // 2]}", file=f"/remote/{i}.json")
        for i, path in enumerate(_analysis.find_traces(str(root)))
    ]
    manifest = {"nodes": [{"rank": 0, "name": "gpu-a", "collected": True, "files": [{"path": "x"}]}]}
    manifest["nodes"].append({"rank": 1, "name": "gpu-b", "collected": False, "files": [], "error": "no archive"})
    (root / "manifest.json").write_text(json.dumps(manifest))
    report = _report.build_report(str(root), summaries=summaries)
    assert (report["traces_in_full"], report["summaries_only"]) == (["gpu-a"], ["gpu-b"])
    assert [s["rank"] for s in report["stragglers"]] == [3]
    words = "in full here: 1 node (gpu-a); summaries only, made on the nodes: 1 node (gpu-b)"
    assert _opening_text(report) == words
    # None collected: the summaries alone; the JSON names every node, the page the first eight.
    many = [dict(s, node=f"n{i:02d}") for i, s in enumerate(summaries * 5)]
    many = [dict(s, rank=i) for i, s in enumerate(many)]
    report = _report.build_report(str(tmp_path / "nowhere"), summaries=many)
    assert (report["traces_in_full"], report["summaries_only"]) == ([], [f"n{i:02d}" for i in range(20)])
    assert _opening_text(report) == (
        "summaries only, made on the nodes (aorta_parse_on_nodes): 20 nodes "
        "(n00, n01, n02, n03, n04, n05, n06, n07 and 12 more); no trace in full here"
    )
    # An earlier version's report has neither key: no row.
    assert "run-traces" not in {
        row["id"] for row in _opening.opening_rows(dict(report, traces_in_full=None, summaries_only=None))
    }


def _opening_text(report: dict) -> str:
    (row,) = [row for row in _opening.opening_rows(report) if row["id"] == "run-traces"]
    return row["text"]


def _analysed(node: str, rank: int, decoder: str = "msgspec", analysis_s: float = 1.0, **extra) -> dict:
    """One node_analysis row, as the action gives it for a node that analysed its own traces."""
    row = {"node": node, "rank": rank, "decoder": decoder, "analysis_s": analysis_s, "files": 2, "bytes": 1000}
    return {**row, "peak_rss_mb": 120.5, **extra}


def test_node_analysis_counts_the_nodes_names_those_without_msgspec_by_rank_and_the_slowest():
    rows = [
        _analysed("n3", 3, "json", 9.0),
        _analysed("n0", 0, analysis_s=2.0),
        _analysed("n5", 5, analysis_s=4.0, peak_rss_mb=None),
        _analysed("n1", 1, "json", 4.0),
        _analysed("n2", 2, analysis_s=1.0),
        _analysed("n4", 4, analysis_s=3.0),
        _analysed("n6", 6, analysis_s=0.5),
    ]
    found = _report.node_analysis(rows)
    assert found == {
        "nodes": 7,
        "without_msgspec": ["n1", "n3"],
        # The given rows, the slowest first; of the two at 4 s, rank 1 before rank 5.
        "slowest": [rows[0], rows[3], rows[2], rows[5], rows[1]],
        "analysis_s": {"median": 3.0, "max": 9.0},
        "bytes": 7000,
    }
    assert found["slowest"][0] is not rows[0]  # a copy: the report's rows are its own
    # A report from full traces (the argument left out or empty): null.
    assert _report.node_analysis(None) is None and _report.node_analysis([]) is None


def test_nodes_that_analysed_their_traces_are_in_the_report_and_one_warning_names_those_without_msgspec(
    tmp_path, combined_tree
):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    summaries = [
        dict(_analysis.analyse(path), node=f"gpu-{'ab'[i // 2]}", file=f"/remote/{i}.json")
        for i, path in enumerate(_analysis.find_traces(str(root)))
    ]
    rows = [_analysed("gpu-b", 1, "json", 12.0), _analysed("gpu-a", 0, analysis_s=3.0)]
    result, failure = _task_of(root, summaries=summaries, node_analysis=rows)
    assert failure == ""
    warning = (
        "1 node analysed with the standard library's JSON decoder (no msgspec): gpu-b: "
        "slower, and more memory per file (docs/scale.md)"
    )
    assert result["report_warnings"] == [warning]
    written = json.loads((root / "aorta_benchmark_report.json").read_text())
    assert written["node_analysis"] == {
        "nodes": 2,
        "without_msgspec": ["gpu-b"],
        "slowest": [rows[0], rows[1]],
        "analysis_s": {"median": 7.5, "max": 12.0},
        "bytes": 2000,
    }
    html = (root / "report.html").read_text()
    line = "analysed on the nodes: 2 nodes in 7.5 s median, 12.0 s at most (slowest: gpu-b (12.0 s), gpu-a (3.0 s))"
    assert line in html
    assert html.count("(no msgspec)") == 1  # in the opening rows, not again among the warnings
    # Every node with msgspec: no warning, the line still there.
    result, failure = _task_of(root, summaries=summaries, node_analysis=[dict(r, decoder="msgspec") for r in rows])
    assert failure == "" and result["report_warnings"] == []
    assert json.loads((root / "aorta_benchmark_report.json").read_text())["node_analysis"]["without_msgspec"] == []
    assert "(no msgspec)" not in (root / "report.html").read_text()
    # A report from full traces: null, and neither line.
    result, failure = _task_of(root)
    assert failure == "" and result["report_warnings"] == []
    assert json.loads((root / "aorta_benchmark_report.json").read_text())["node_analysis"] is None
    assert "analysed on the nodes" not in (root / "report.html").read_text()


def test_many_nodes_without_msgspec_are_one_warning_naming_the_first_eight():
    rows = [_analysed(f"n{i:02d}", i, "json") for i in reversed(range(11))]
    report = _report.build_report("/nowhere", summaries=[], node_analysis_rows=rows)
    assert report["warnings"] == [
        "11 nodes analysed with the standard library's JSON decoder (no msgspec): "
        "n00, n01, n02, n03, n04, n05, n06, n07 and 3 more: slower, and more memory per file (docs/scale.md)"
    ]
