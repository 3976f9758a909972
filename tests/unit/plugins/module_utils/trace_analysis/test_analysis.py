# SPDX-License-Identifier: GPL-3.0-or-later
"""Trace analysis against TraceLens' figures, on CPU-only traces, on bad files, and across ranks."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _thresholds
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report

ROWS = (
    "computation_time",
    "exposed_comm_time",
    "exposed_memcpy_time",
    "busy_time",
    "idle_time",
    "total_time",
    "total_comm_time",
)
# TraceLens gpu_timeline reference figures (ms), tests/fixtures/traces/README.md.
LINKED = {
    "mi300/qwen1.5-0.5b-chat.json.gz": (29.74317, 0, 0.00076, 29.74393, 3.38741, 33.13133, 0),
    "mi300/resnet-act-checkpoint.json.gz": (19.23413, 35.28311, 1.58363, 56.10087, 0.41673, 56.51760, 47.20031),
    "mi350x/aorta-sample.pt.trace.json.gz": (0.25948, 0, 0, 0.25948, 0.50104, 0.76052, 0),
}
UNLINKED = {
    "mi300/qwen1.5-0.5b-chat.json.gz": (43.06203, 0, 0.00076, 43.06279, 4.02301, 47.08580, 0),
    "mi300/resnet-act-checkpoint.json.gz": (26.17500, 55.37122, 2.45585, 84.00207, 2.56564, 86.56771, 71.51652),
    "mi350x/aorta-sample.pt.trace.json.gz": (0.26544, 0, 0, 0.26544, 0.49508, 0.76052, 0),
}


def close(got, want):
    return abs(got - want) <= max(abs(want) * 1e-3, 1e-5)  # within 0.1% (absolute floor for zeros)


@pytest.mark.parametrize("unlinked,table", [(False, LINKED), (True, UNLINKED)], ids=["tracelens-default", "unlinked"])
@pytest.mark.parametrize("name", sorted(LINKED))
def test_gpu_timeline_matches_tracelens(fixtures_dir, name, unlinked, table):
    result = _analysis.analyse(str(fixtures_dir / "traces" / name), include_unlinked_kernels=unlinked)
    timeline = result["gpu_timeline"]
    for row, want in zip(ROWS, table[name]):
        assert close(timeline[row], want), f"{row}: {timeline[row]} vs TraceLens {want}"


def union_ms(spans):
    """Length of a union of (start, end) microsecond spans, in ms: the test's own merge."""
    total, end = 0.0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total / 1000.0


def test_a_graph_launch_counts_every_kernel_it_replays_without_flows_of_their_own(fixtures_dir):
    """sglang decode on MI300X: one hipGraphLaunch replays 544 kernels sharing its correlation."""
    path = fixtures_dir / "traces" / "set2" / "sglang-qwen3-8b-decode.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    launches = [
        e for e in events if e.get("name") == "hipGraphLaunch" and e.get("cat") in ("cuda_runtime", "cuda_driver")
    ]
    graph = {e["args"]["correlation"] for e in launches}
    replayed = [e for e in events if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in graph]
    starts = {e["id"] for e in events if e.get("cat") == "ac2g" and e.get("ph") == "s"}
    assert len(replayed) == 544 and not graph & starts  # no flow of their own
    ends = {e["id"]: (e["pid"], e["tid"]) for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f"}
    launched = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    flowed = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_memset")
        and (c := e.get("args", {}).get("correlation")) in launched
        and c in starts
        and ends.get(c) == (e["pid"], e["tid"])
    ]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in replayed + flowed]
    result = _analysis.analyse(str(path))
    assert result["gpu_timeline"]["computation_time"] == pytest.approx(union_ms(compute), rel=1e-9)
    # TraceLens' default mode counts 9.760 ms here (issue 14); without the graph's kernels, 0.109.
    assert result["gpu_timeline"]["computation_time"] == pytest.approx(9.760, rel=0.005)


def test_tracelens_kernel_classes_for_amd_names(tmp_path):
    names = {
        "MEMORY_COPY_HOST_TO_DEVICE": "memcpy",
        "__amd_rocclr_copyBuffer.kd": "memcpy",
        "__amd_rocclr_copyBufferRectAligned.kd": "memcpy",
        "__amd_rocclr_fillBufferAligned.kd": "computation",
        "triton_per_fused__to_copy_sum_2.kd": "computation",
        "void sglang::cross_device_reduce_1stage<__half, 8>": "communication",
        "rcclGenericKernel": "communication",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": "communication",
    }
    events = []
    for i, name in enumerate(names):  # one kernel each, 10 us, apart: each class's time is 10 us per kernel
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": i * 100, "dur": 10, "pid": 0, "tid": 7})
    path = tmp_path / "amd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    timeline = _analysis.analyse(str(path), include_unlinked_kernels=True)["gpu_timeline"]
    expected = {kind: 0.01 * list(names.values()).count(kind) for kind in ("memcpy", "computation", "communication")}
    assert timeline["total_memcpy_time"] == pytest.approx(expected["memcpy"])
    assert timeline["computation_time"] == pytest.approx(expected["computation"])
    assert timeline["total_comm_time"] == pytest.approx(expected["communication"])


def test_kernel_categories_and_collectives_on_a_gpu_trace(fixtures_dir):
    result = _analysis.analyse(str(fixtures_dir / "traces" / "nccl" / "nccl-data.json.gz"))
    assert result["rank"] == 0 and result["world_size"] == 2
    assert set(result["collectives"]) >= {"allreduce", "broadcast"}
    allreduce = result["collectives"]["allreduce"]
    assert allreduce["count"] > 0 and allreduce["time_ms"] > 0 and allreduce["bytes"] > 0
    categories = result["kernel_time_by_category_ms"]
    assert categories["communication"] == pytest.approx(result["gpu_timeline"]["total_comm_time"], rel=0.5)
    assert result["iterations"]["count"] > 0 and result["overlap_ratio"] >= 0


def test_cpu_only_trace_gives_iteration_and_communication_metrics(fixtures_dir):
    result = _analysis.analyse(str(fixtures_dir / "traces" / "nccl" / "cpu-only-rank34.json.gz"))
    assert result["gpu"] is False and result["gpu_timeline"] is None
    assert result["rank"] == 34
    assert result["iterations"]["count"] >= 1 and result["iterations"]["mean"] > 0
    assert result["comm_time_ms"] > 0
    assert 0 < result["comm_ratio"] <= 1


@pytest.mark.parametrize(
    "content,words",
    [
        (b"", "empty file"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', "not a Kineto trace"),
        (b'\xff\xfe{"traceEvents": []}', "not a Kineto trace"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1' + b"9" * 400 + b', "dur": 1}]}',
            "not a Kineto trace",
        ),
        (b'{"traceEvents": {"a": 1}}', "not a Kineto trace"),
    ],
    ids=["empty", "truncated", "non-utf8", "huge-integer", "events-not-an-array"],
)
def test_bad_files_give_one_clear_error_naming_the_file(tmp_path, content, words):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = _analysis.safe_analyse(str(path))
    assert result["error"].startswith(f"{path}: ")
    assert words in result["error"]


def test_a_slow_rank_is_named_with_its_node_though_every_iteration_time_is_equal(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50, 80, 50])
    report = _report.build_report(str(root), max_workers=2)
    step = {r["rank"]: r["step_time_ms"] for r in report["per_rank_summary"]}
    assert len(set(round(v, 6) for v in step.values())) == 1  # synchronous: all the same
    # iteration_time_ms: the same per-step value, a deprecated alias kept for earlier reports' readers.
    assert all(r["iteration_time_ms"] == r["step_time_ms"] for r in report["per_rank_summary"])
    assert [(s["rank"], s["node"]) for s in report["stragglers"]] == [(4, "gpu-c")]
    assert (
        report["stragglers"][0]["comm_wait_per_iteration_ms"]
        < report["stragglers"][0]["median_comm_wait_per_iteration_ms"]
    )
    assert report["status"] == "partial"  # the broken file
    assert [e["file"] for e in report["errors"]] == [str(root / "node_0" / "torch_profiler" / "broken.json")]


def test_a_whole_slow_node_is_reported(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 80, 81, 50, 50], bad_file=False)
    report = _report.build_report(str(root), max_workers=1)
    # Its ranks are no slower than each other: the finding is the node's, not theirs.
    assert report["stragglers"] == []
    assert [n["node"] for n in report["slow_nodes"]] == ["gpu-b"]
    assert report["slow_nodes"][0]["ranks"] == [2, 3]
    assert report["status"] == "completed"


def test_missing_ranks_are_listed_and_the_rest_analysed(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False, drop=(3,))
    report = _report.build_report(str(root))
    assert report["missing_ranks"] == [3]
    assert [r["rank"] for r in report["per_rank_summary"]] == [0, 1, 2]
    assert report["cluster"]["nodes"] == 2


def test_report_fields_and_thresholds(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    report = _report.build_report(
        str(root),
        expected_results={"max_avg_iteration_ms": 90, "min_compute_ratio": 0.4, "max_time_variance_ratio": 0.5},
        gpus_per_node=2,
    )
    assert set(report) >= {
        "status",
        "duration_seconds",
        "cluster",
        "configuration",
        "performance",
        "per_rank_summary",
        "stragglers",
        "validation",
    }
    assert report["cluster"] == {"nodes": 2, "gpus_per_node": 2, "total_gpus": 4}
    perf = report["performance"]
    # CVS's avg_iteration_time_ms is each rank's profiled window (4 steps of 100 ms), averaged;
    # the per-step figure keeps its own name.
    assert perf["avg_iteration_time_ms"] == pytest.approx(400.0)
    assert perf["avg_step_time_ms"] == pytest.approx(100.0)
    assert perf["std_iteration_time_us"] == pytest.approx(0.0, abs=1e-6)
    assert perf["avg_compute_ratio"] == pytest.approx(0.5)
    checks = {c["name"]: c for c in report["validation"]["checks"]}
    assert not checks["max_avg_iteration_ms"]["passed"]
    assert "exceeds threshold 90" in checks["max_avg_iteration_ms"]["reason"]
    assert checks["min_compute_ratio"]["passed"] and checks["max_time_variance_ratio"]["passed"]
    assert report["validation"]["passed"] is False
    row = report["per_rank_summary"][0]
    assert set(row) >= {"rank", "node", "file", "gpu_timeline"}
    assert row["node"] == "gpu-a" and row["file"].startswith("node_0/")
    # A survey answer is text: numbers in text are converted, an empty answer skips the check.
    text_checks = _thresholds.check_thresholds(perf, {"max_avg_iteration_ms": "450", "min_overlap_ratio": ""})
    assert [(c["name"], c["passed"], c["threshold"]) for c in text_checks] == [("max_avg_iteration_ms", True, 450.0)]
    with pytest.raises(_thresholds.ReportError, match=r"min_compute_ratio: 'half' is not a number"):
        _thresholds.check_thresholds(perf, {"min_compute_ratio": "half"})
    with pytest.raises(_thresholds.ReportError, match="unknown threshold max_iteration"):
        _report.build_report(str(root), expected_results={"max_iteration": 1})


def test_outputs_are_written(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 80, 50], bad_file=False)
    report = _report.build_report(str(root))
    paths = _outputs.write_outputs(report, str(tmp_path / "out"))
    written = json.loads(Path(paths["report"]).read_text())
    assert written["stragglers"][0]["rank"] == 2
    lines = Path(paths["csv"]).read_text().splitlines()
    # A step is one ProfilerStep#N; the rank's CVS iteration (its profiled window) is total_time_us.
    assert lines[0].startswith(
        "rank,node,file,step_time_ms,compute_ratio,comm_ratio,overlap_ratio,compute_per_step_ms,"
        "comm_wait_per_step_ms,total_time_us,"
    )
    assert "iteration" not in lines[0] and len(lines) == 5
    html = Path(paths["html"]).read_text()
    assert "data:image/png" not in html and html.count("<svg") == 5  # 2 heat maps, 2 histograms, the bars
    assert "<h2>Stragglers</h2><table id='stragglers'>" in html and "<td>2</td><td>gpu-b</td>" in html


def test_plain_folder_without_manifest_uses_directories(tmp_path, fixtures_dir):
    folder = tmp_path / "plain"
    folder.mkdir()
    for name in ("nccl/nccl-data.json.gz", "mi300/qwen1.5-0.5b-chat.json.gz"):
        (folder / name.replace("/", "_")).write_bytes((fixtures_dir / "traces" / name).read_bytes())
    report = _report.build_report(str(folder))
    assert [r["rank"] for r in report["per_rank_summary"]] == [0]
    assert report["per_rank_summary"][0]["node"] == "."
    assert [u["file"] for u in report["unranked_traces"]] == ["mi300_qwen1.5-0.5b-chat.json.gz"]
    assert report["unranked_traces"][0]["gpu_timeline"]["total_time"] == pytest.approx(33.13133, rel=1e-3)


def test_one_trace_without_distributed_info_is_a_one_process_run_not_a_failure(tmp_path, fixtures_dir):
    folder = tmp_path / "single"
    folder.mkdir()
    name = "mi300/qwen1.5-0.5b-chat.json.gz"
    (folder / "trace.json.gz").write_bytes((fixtures_dir / "traces" / name).read_bytes())
    report = _report.build_report(str(folder), expected_results={"max_avg_iteration_ms": 1e9})
    assert report["status"] == "completed" and report["missing_ranks"] == [] and report["unranked_traces"] == []
    (row,) = report["per_rank_summary"]
    assert row["rank"] == 0 and row["single_process"] is True
    assert row["gpu_timeline"]["total_time"] == pytest.approx(LINKED[name][5], rel=1e-3)
    assert row["compute_ratio"] is not None
    assert report["performance"]["avg_compute_ratio"] == row["compute_ratio"]
    assert all(c["passed"] or "no value" not in c["reason"] for c in report["validation"]["checks"])


def test_report_from_node_summaries_needs_no_trace_here(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 90, 50], bad_file=False)
    summaries = []
    for path in _analysis.find_traces(str(root)):
        summary = _analysis.analyse(path)
        summaries.append(dict(summary, node=f"host-{summary['rank'] // 2}", file=f"/remote/rank{summary['rank']}.json"))
    report = _report.build_report(str(tmp_path / "not-here"), summaries=summaries)
    assert [(s["rank"], s["node"]) for s in report["stragglers"]] == [(2, "host-1")]
    assert report["per_rank_summary"][0]["file"] == "/remote/rank0.json"
    with pytest.raises(_thresholds.ReportError, match="is not a directory"):
        _report.build_report(str(tmp_path / "not-here"))


def test_a_node_summarises_the_traces_its_collection_would_take(tmp_path, combined_tree):
    """trace_summary reads what trace_pack takes (and trace_parse then reads in combined_traces):
    not an earlier run's file, a consolidated tree, a link, a dot directory or a manifest."""
    root = combined_tree(tmp_path, [50, 50], bad_file=False) / "node_0"
    run = root / "torch_profiler"
    floor = (run / "rank0" / "trace.json.gz").stat().st_mtime - 60
    for rel in ("rank0/old.json", "../combined_traces/node_1/t.json", "../.cache/t.json", "rank1/manifest.json"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("{}")
    os.utime(run / "rank0" / "old.json", (floor - 3600, floor - 3600))
    (root / "latest.json").symlink_to(run / "rank1" / "trace.json.gz")
    (run / "rank1" / "metrics.jsonl").write_text("{}")
    expected = [str(run / "rank0" / "trace.json.gz"), str(run / "rank1" / "trace.json.gz")]
    assert _analysis.find_run_traces(str(root), floor) == expected
    assert len(_analysis.find_run_traces(str(root))) == 3  # since 0: the earlier run's file too
    assert _analysis.find_run_traces(str(tmp_path / "gone"), floor) == []


def test_the_profilers_closing_sliver_of_a_step_is_not_an_iteration(tmp_path):
    """Kineto's last ProfilerStep#N runs from the final step() to the export: counted, it halved a
    short run's mean step and swamped its spread."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i}",
            "ts": i * 100.0,
            "dur": 80.0,
            "pid": 1,
            "tid": 1,
        }
        for i in range(4)
    ]
    events.append(
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "ts": 400.0, "dur": 0.2, "pid": 1, "tid": 1}
    )
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = _analysis.analyse(str(path))
    assert result["iterations"]["count"] == 4 and result["iterations"]["mean"] == pytest.approx(0.08)
    assert result["partial_steps"] == 1


def reference_timeline(events: list, include_unlinked: bool) -> dict | None:
    """TraceLens' gpu_timeline from first principles, over plain json events, by a sweep over every
    boundary (not the module's interval code): GPU events are kernel / gpu_memcpy / gpu_memset; by
    default only those a launch links to (launch correlation, an ac2g flow start with that id and
    its end at the event's pid/tid) or that carry a graph launch's correlation; nccl / rccl /
    cross_device_reduce kernels communicate, gpu_memcpy and MEMORY_COPY_* / __amd_rocclr_copyBuffer*
    kernels copy, the rest computes."""
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not include_unlinked:
        launches, graphs = set(), set()
        for e in events:
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {}):
                launches.add(e["args"]["correlation"])
                if e.get("name") in ("cudaGraphLaunch", "hipGraphLaunch"):
                    graphs.add(e["args"]["correlation"])
        starts = {e.get("id") for e in events if e.get("cat") == "ac2g" and e.get("ph") == "s"}
        ends = {
            e.get("id"): (e.get("pid"), e.get("tid")) for e in events if e.get("cat") == "ac2g" and e.get("ph") == "f"
        }

        def linked(e):
            corr = (e.get("args") or {}).get("correlation")
            return corr in graphs or (corr in launches and corr in starts and ends.get(corr) == (e["pid"], e["tid"]))

        gpu = [e for e in gpu if linked(e)]
    if not gpu:
        return None

    def kind(e):
        name = e.get("name") or ""
        if e["cat"] == "gpu_memcpy" or (
            e["cat"] == "kernel" and name.startswith(("MEMORY_COPY_", "__amd_rocclr_copyBuffer"))
        ):
            return "memcpy"
        if e["cat"] == "kernel" and any(m in name for m in ("nccl", "rccl", "cross_device_reduce")):
            return "comm"
        return "comp"

    edges = []
    for e in gpu:
        edges += [(e["ts"], 1, kind(e)), (e["ts"] + e["dur"], -1, kind(e))]
    edges.sort(key=lambda edge: edge[0])
    active = {"comp": 0, "comm": 0, "memcpy": 0}
    sums = dict.fromkeys(("comp", "comm", "memcpy", "busy", "exposed_comm", "exposed_memcpy"), 0.0)
    last = edges[0][0]
    for at, step, what in edges:
        width = at - last
        if width > 0:
            sums["comp"] += width if active["comp"] else 0
            sums["comm"] += width if active["comm"] else 0
            sums["memcpy"] += width if active["memcpy"] else 0
            sums["busy"] += width if any(active.values()) else 0
            sums["exposed_comm"] += width if active["comm"] and not active["comp"] else 0
            sums["exposed_memcpy"] += width if active["memcpy"] and not active["comp"] and not active["comm"] else 0
        active[what] += step
        last = at
    total = max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)
    ms = {k: v / 1000.0 for k, v in sums.items()}
    return {
        "computation_time": ms["comp"],
        "exposed_comm_time": ms["exposed_comm"],
        "exposed_memcpy_time": ms["exposed_memcpy"],
        "busy_time": ms["busy"],
        "idle_time": total / 1000.0 - ms["busy"],
        "total_time": total / 1000.0,
        "total_comm_time": ms["comm"],
        "total_memcpy_time": ms["memcpy"],
    }


# Every trace under the repository's fixtures (tests/fixtures/traces, as conftest's fixtures_dir).
_TRACES = Path(__file__).resolve().parents[4] / "fixtures" / "traces"
FIXTURE_TRACES = sorted(str(p.relative_to(_TRACES)) for p in _TRACES.rglob("*.json*"))


def test_the_fixture_traces_are_there():
    assert len(FIXTURE_TRACES) >= 20, FIXTURE_TRACES  # an empty list would parametrize nothing


@pytest.mark.parametrize("name", FIXTURE_TRACES)
def test_every_fixture_trace_matches_tracelens_definitions_in_both_modes(fixtures_dir, name):
    path = fixtures_dir / "traces" / name
    raw = path.read_bytes()
    events = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)["traceEvents"]
    for unlinked in (False, True):
        want = reference_timeline(events, unlinked)
        got = _analysis.analyse(str(path), include_unlinked_kernels=unlinked)["gpu_timeline"]
        if want is None:
            assert got is None, (name, unlinked, got)
            continue
        for row, value in want.items():
            assert abs(got[row] - value) <= max(abs(value) * 0.005, 1e-5), (name, unlinked, row, got[row], value)
