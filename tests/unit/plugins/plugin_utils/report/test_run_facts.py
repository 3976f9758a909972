# SPDX-License-Identifier: GPL-3.0-or-later
"""What run.json adds to the report: the run's status, context and throughput first; the fabric
sweep's slow links with the traces' collective figures."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _stragglers
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _opening
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report, _run_facts, _task

STRAGGLERS = Path(__file__).parents[2] / "module_utils" / "trace_analysis" / "straggler_data"


def _task_of(traces_dir, **extra):
    params = {name: spec.get("default") for name, spec in _task.TASK_ARGUMENT_SPEC.items()}
    params.update(traces_dir=str(traces_dir), report_dir=str(traces_dir), **extra)
    return _task.run_task(params)


def test_the_run_record_opens_the_report_with_its_status_context_and_throughput(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 80, 81, 50, 50], bad_file=False)
    record = {
        "run_id": "20261202T010203-abcdef",
        "status": "COMPLETED",
        "message": "all 3 nodes completed",
        "started_epoch": 1796180000,
        "finished_epoch": 1796180095,
        "nodes": [],
        "context": {
            "image": "rocm/pytorch:latest",
            "image_id": "sha256:1234",
            "base_config": "config/distributed.yaml",
            "overrides": {"training.max_steps": 6},
            "nodes": 3,
            "gpus_per_node": 2,
            "settings": {"batch_size": 8, "sequence_length": 128, "note": ""},
        },
    }
    (tmp_path / "run.json").write_text(json.dumps(record))
    result, failure = _task_of(root)
    assert failure == "", failure
    run = result["run"]
    assert run["status"] == "COMPLETED" and run["duration_seconds"] == 95
    step_s = result["performance"]["avg_step_time_ms"] / 1000.0
    assert run["samples_per_second"] == pytest.approx(8 * 6 / step_s)
    assert run["tokens_per_second"] == pytest.approx(8 * 6 / step_s * 128)
    report = json.loads((root / "aorta_benchmark_report.json").read_text())
    assert report["duration_seconds"] == 95
    html = (root / "report.html").read_text()
    opening = [html.index(f"id='{key}'") for key in ("run-status", "run-id", "run-time", "run-size", "throughput")]
    opening.append(html.index("id='finding'"))
    assert opening == sorted(opening) and max(opening) < html.index("id='headline'")
    assert "slow node gpu-b" in html[: html.index("id='headline'")]
    assert "samples/s" in html and "tokens/s" in html
    assert "id='run-excluded'" not in html and "id='run-drift'" not in html  # only when there are any

    record["excluded"] = [
        {"name": "gpu-c", "reasons": ["preflight[health]: gpu-c: 1 uncorrectable ECC error(s) on GPU 3"]}
    ]
    record["drift"] = [{"field": "amdgpu", "label": "amdgpu driver", "count": 1, "of": 3}]
    (tmp_path / "run.json").write_text(json.dumps(record))
    result, failure = _task_of(root)
    assert result["run"]["excluded"] == [
        {"name": "gpu-c", "reason": "preflight[health]: gpu-c: 1 uncorrectable ECC error(s) on GPU 3"}
    ]
    html = (root / "report.html").read_text()
    assert html.index("id='run-excluded'") < html.index("id='run-size'")
    assert "amdgpu driver: 1 of 3 nodes differ" in html[: html.index("id='headline'")]


def test_a_bare_folder_says_it_has_no_run_record(tmp_path, combined_tree):
    root = combined_tree(tmp_path / "x", [50, 50], bad_file=False)
    result, failure = _task_of(root)
    assert failure == "" and result["run"]["record"] is None
    assert "no run record" in (root / "report.html").read_text()


# Six real GPU ranks on three nodes of two: rank 2 holds a real NCCL trace's all-reduces and broadcasts
# of known sizes (group 2), the others DLRM ranks' NCCL kernels (time, no sizes).
GPU_RANKS = (
    "set2/dlrm-rank1",
    "set2/dlrm-rank2",
    "nccl/nccl-data",
    "set2/dlrm-rank3",
    "set2/dlrm-rank4",
    "set2/dlrm-rank5",
)


NODES = ("10.0.0.2", "10.0.0.3", "10.0.0.4")


def fabric_sweep(*slow: dict, **extra) -> dict:
    """run.json's ``fabric_sweep`` as the head's judgement writes it: 3 nodes, 3 rounds of TCP."""
    sweep = {
        "ran": True,
        "tool": "tcp",
        "seconds": 10.0,
        "threshold": 0.5,
        "min_gbps": None,
        "median_gbps": 180.0,
        "localisable": True,
        "reason": None,
        "rounds": [
            {"round": r, "shift": s, "pairs": 3, "figures": 6, "median_gbps": 180.0} for r, s in enumerate((1, 2))
        ],
        "slow": list(slow),
        "unresolved": [],
        "unresolved_count": 0,
        "not_measured": [],
        "not_measured_count": 0,
    }
    return sweep | extra


SLOW = {
    "node": "10.0.0.3",
    "rank": 1,
    "direction": "send",
    "send_gbps": 9.4,
    "recv_gbps": 176.0,
    "median_gbps": 180.0,
    "ratio": 0.052,
    "rounds": 2,
}


def _run_json(tmp_path, **extra) -> str:
    record = {"run_id": "20261202T010203-abcdef", "status": "COMPLETED", "message": "all 3 nodes completed"}
    record |= {"nodes": [], "context": {"nodes": 3, "gpus_per_node": 2}} | extra
    (tmp_path / "run.json").write_text(json.dumps(record))
    return str(tmp_path / "run.json")


def _busbw_by_op(path) -> dict:
    """Per collective op of a raw trace, by hand: bytes moved (nccl-tests' size: the larger buffer)
    over kernel time, in GB/s; with a group of 2 every op's bus factor is 1."""
    sizes = {"Float": 4, "Long": 8}
    moved: dict = {}
    for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
        if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower():
            a = e["args"]
            assert a["Group size"] == 2
            row = moved.setdefault(a["Collective name"], [0, 0.0])
            row[0] += max(a["In msg nelems"], a["Out msg nelems"]) * sizes[a["dtype"]]
            row[1] += e["dur"]
    return {op: size / (us / 1e6) / 1e9 for op, (size, us) in moved.items()}


def test_a_slow_link_the_sweep_named_is_in_the_report_with_its_collectives_and_busbw_against_the_fabric(
    tmp_path, fixtures_dir
):
    paths = [fixtures_dir / "traces" / f"{name}.json.gz" for name in GPU_RANKS]
    summaries = [dict(_analysis.analyse(str(p), True), rank=i, node=NODES[i // 2]) for i, p in enumerate(paths)]
    run_json = _run_json(tmp_path, fabric_sweep=fabric_sweep(SLOW))
    _result, failure = _task_of(tmp_path / "out", summaries=summaries, run_json=run_json, expected_ranks=6)
    assert failure == "", failure
    report = json.loads((tmp_path / "out" / "aorta_benchmark_report.json").read_text())
    # By hand: each node's median time in communication over its two ranks, against the median node's.
    nodes = [statistics.median(s["comm_time_ms"] for s in summaries[i : i + 2]) for i in (0, 2, 4)]
    busbw = _busbw_by_op(paths[2])
    worst = min(busbw, key=busbw.get)
    assert worst == "broadcast" and busbw["allreduce"] > busbw[worst]
    (link,) = report["slow_links"]
    assert link == {
        "node": "10.0.0.3",
        "node_rank": 1,
        "direction": "send",
        "send_gbps": 9.4,
        "recv_gbps": 176.0,
        "median_gbps": 180.0,
        "ratio": 0.052,
        "collective_ratio": pytest.approx(nodes[1] / statistics.median(nodes), abs=1e-3),
        "busbw_ratio": pytest.approx(busbw[worst] * 8 / 180.0, abs=1e-3),
        "busbw_op": "broadcast",
    }
    assert link["collective_ratio"] == 3.821 and link["busbw_ratio"] == 0.248
    assert report["fabric_sweep"] == {
        "ran": True,
        "tool": "tcp",
        "seconds": 10.0,
        "threshold": 0.5,
        "min_gbps": None,
        "median_gbps": 180.0,
        "localisable": True,
        "reason": None,
        "rounds": 2,
        "slow_count": 1,
        "unresolved_count": 0,
        "not_measured_count": 0,
    }
    html = (tmp_path / "out" / "report.html").read_text()
    row = (
        "10.0.0.3: fabric 9.4 Gbit/s sent against a median of 180 Gbit/s (0.052x); collectives 3.8x the median "
        "node; broadcast busbw 0.25x the fabric"
    )
    assert f"<tr id='slow-link-1'><th>slow link</th><td\nclass='bad'>{row}</td></tr>" in html
    assert html.index("id='slow-link-1'") < html.index("<svg") and "id='fabric-sweep'" not in html
    # Each collective against the fabric: the 7.8 MiB all-reduce's busbw, x8 in Gbit/s, over 180.
    collectives = html[html.index("id='collectives'") :]
    assert "<th>busbw (GB/s)</th><th>of fabric</th>" in collectives
    assert "<td>2.080</td><td>2.080</td><td>0.092x</td>" in collectives
    assert "of fabric = busbw \u00d7 8 (Gbit/s) / the fabric sweep&#39;s median, 180 Gbit/s" in collectives


def test_on_stand_in_traces_without_node_names_a_slow_link_finds_its_ranks_by_node_rank(tmp_path):
    """A bare folder of recorded stand-in ranks (gloo: no GPU collective, no node names): the slow
    node's ranks are found by node rank (2 ranks a node), and the busbw part is left out."""
    traces = tmp_path / "traces"
    shutil.copytree(STRAGGLERS / "ok1", traces)
    run_json = _run_json(tmp_path, fabric_sweep=fabric_sweep(dict(SLOW, node="10.0.0.9", rank=1)))
    _result, failure = _task_of(traces, run_json=run_json, expected_ranks=4)
    assert failure == "", failure
    report = json.loads((traces / "aorta_benchmark_report.json").read_text())
    assert {row["node"] for row in report["per_rank_summary"]} == {"."} and report["collective_table"] == []
    comm = {row["rank"]: row["comm_time_ms"] for row in report["per_rank_summary"]}
    node_0, node_1 = statistics.median([comm[0], comm[1]]), statistics.median([comm[2], comm[3]])
    (link,) = report["slow_links"]
    assert link["collective_ratio"] == round(node_1 / statistics.median([node_0, node_1]), 3) != 1.0
    assert link["busbw_ratio"] is None and link["busbw_op"] is None
    text = _opening.opening_rows(report)
    (row,) = [r for r in text if r["id"] == "slow-link-1"]
    ratio = _stragglers.times(link["collective_ratio"])
    assert row["text"] == (
        f"10.0.0.9: fabric 9.4 Gbit/s sent against a median of 180 Gbit/s (0.052x); collectives {ratio} the median node"
    )


def test_a_run_json_without_a_fabric_sweep_gives_no_slow_link_and_no_row(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    _run_json(tmp_path)  # beside combined_traces, as a run writes it, of an earlier version: no fabric_sweep
    result, failure = _task_of(root)
    assert failure == "" and result["run"]["record"] == str(tmp_path / "run.json")
    report = json.loads((root / "aorta_benchmark_report.json").read_text())
    assert report["slow_links"] == [] and report["fabric_sweep"] is None
    ids = {row["id"] for row in _opening.opening_rows(report)}
    assert not {i for i in ids if i.startswith(("slow-link", "fabric-sweep"))}
    # A bare folder (no run.json at all): the same.
    bare = _report.build_report(str(root))
    assert bare["slow_links"] == [] and bare["fabric_sweep"] is None
    assert _run_facts.fabric_findings(None, bare) == {"fabric_sweep": None, "slow_links": []}


def test_a_sweep_that_did_not_run_or_named_nobody_gives_no_slow_link_and_says_so(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    report = _report.build_report(str(root))
    off = {"ran": False, "why": "no node swept: aorta_fabric_sweep off, or no node reached the go"}
    assert _run_facts.fabric_findings({"fabric_sweep": off}, report) == {"fabric_sweep": off, "slow_links": []}
    lost = _run_facts.fabric_findings({"fabric_sweep": fabric_sweep(slow=None, unresolved=None)}, report)
    assert lost["slow_links"] == [] and lost["fabric_sweep"]["slow_count"] == 0
    assert lost["fabric_sweep"]["unresolved_count"] == 0
    # Counts from the lists where run.json has no *_count.
    unresolved = [{"node": "gpu-b", "rank": 1, "direction": "send", "ratio": 0.3, "rounds": 1, "why": "one round"}]
    found = _run_facts.fabric_sweep_summary({"fabric_sweep": {"ran": True, "unresolved": unresolved}})
    assert found["unresolved_count"] == 1 and found["not_measured_count"] == 0 and found["rounds"] == 0
