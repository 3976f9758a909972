# SPDX-License-Identifier: GPL-3.0-or-later
"""The same report either way (issue 41): 1024 ranks (128 nodes x 8) with one slow node and one
straggler rank elsewhere, analysed from the full traces on the controller (the combined_traces tree,
as aorta_collect_traces leaves it) and from the summaries each node made of its own output directory
(aorta_collect_traces sample: trace_summary on the node, its summary file, the controller's merge). Both
routes run the code the playbook runs, in-process: trace_summary's main() per node, the combined
tree's writer, and trace_parse's action with its task variables."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aorta.cluster.plugins.action.trace_parse import ActionModule
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _combined, _decode
from ansible_collections.aorta.cluster.plugins.modules import trace_pack, trace_summary

NODES, PER_NODE, STEPS = 128, 8, 6
WORLD = NODES * PER_NODE
SLOW_NODE = 77  # every rank of it computes 1.35x
STRAGGLER = 21 * PER_NODE + 5  # rank 173, on node 21: 1.5x, alone
HOSTS = [f"mi300x-{n:04d}" for n in range(NODES)]
RUN_ID = "20261201T000000-b0th"
OUTPUT = f"aorta_runs/{RUN_ID}"  # aorta_output_dir, relative to aorta_path on each node
COMPUTE_MS, COMM_MS = 40.0, 6.0
FLOOR = time.time() - 3600  # the run's start floor: the collection takes the files written since
# Thresholds chosen so two pass and two fail, none near its limit.
EXPECTED = {
    "max_avg_iteration_ms": 600.0,
    "min_compute_ratio": 0.9,
    "min_overlap_ratio": 0.2,
    "max_time_variance_ratio": 0.5,
}
FIGURES = (
    "avg_iteration_time_ms",
    "std_iteration_time_us",
    "avg_step_time_ms",
    "std_step_time_us",
    "avg_compute_ratio",
    "avg_comm_ratio",
    "avg_overlap_ratio",
)


def computes(nodes: int, seed: int, slow: bool) -> list:
    """Per rank, per step, its compute in ms: ~2% noise; with ``slow``, the slow node and the straggler."""
    rng = random.Random(seed)
    table = []
    for rank in range(nodes * PER_NODE):
        factor = 1.0
        if slow and rank // PER_NODE == SLOW_NODE:
            factor = 1.35
        elif slow and rank == STRAGGLER:
            factor = 1.5
        table.append([COMPUTE_MS * factor * rng.gauss(1.0, 0.02) for _step in range(STEPS)])
    return table


def kernel(name: str, ts: float, dur: float, corr: int, tid: int, **args) -> list:
    """A GPU kernel with its launch and the ac2g flow that links them (TraceLens' linked kernels)."""
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "ts": ts - 4, "dur": 3, "pid": 1, "tid": 1}
        | {"args": {"correlation": corr}},
        {"ph": "s", "cat": "ac2g", "id": corr, "ts": ts - 4, "pid": 1, "tid": 1, "name": "ac2g"},
        {"ph": "f", "cat": "ac2g", "id": corr, "ts": ts, "pid": 0, "tid": tid, "name": "ac2g", "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": tid}
        | {"args": dict(args, correlation=corr)},
    ]


def rank_trace(rank: int, world: int, table: list, slowest: list) -> dict:
    """A rank of synchronous data-parallel steps: its GEMM, then the all-reduce every rank leaves
    together once the slowest arrived (the late ones wait least), a small kernel overlapping it. Each
    rank's first step starts a little earlier or later (a warm-up kernel), so windows and steps vary."""
    lead = random.Random(rank).uniform(0.0, 2000.0)
    events, t, corr = kernel("warmup_fill_kernel", 1010.0 - lead, lead / 2, 1, 7), 1000.0, 1
    for step in range(STEPS):
        mine, last = table[rank][step] * 1000.0, slowest[step] * 1000.0
        period = last + COMM_MS * 1000.0 + 500.0 + (lead if step == 0 else 0.0)
        start = t - (lead if step == 0 else 0.0)
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": start, "dur": period})
        events[-1].update(pid=1, tid=1)
        events += kernel("Cijk_Alik_Bljk_BBS_gemm", t + 10, mine, corr + 1, 7)
        comm = {"Collective name": "allreduce", "In msg nelems": 1 << 22, "Out msg nelems": 1 << 22}
        comm.update({"dtype": "BFloat16", "Group size": world})
        events += kernel("ncclDevKernel_Generic_4", t + 10 + mine, last - mine + COMM_MS * 1000.0, corr + 2, 8, **comm)
        events += kernel("vectorized_elementwise_kernel", t + 20 + mine, 800.0, corr + 3, 7)
        t, corr = start + period, corr + 3
    # The profiler's closing sliver of a step: no training step, left out by both routes.
    events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{STEPS}", "ts": t, "dur": 40.0})
    events[-1].update(pid=1, tid=1)
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "baseTimeNanoseconds": 1_764_000_000_000_000_000,
        "traceEvents": events,
    }


def node_outputs(root: Path, nodes: int, seed: int, slow: bool) -> dict:
    """Each node's own output directory, as Aorta leaves it: torch_profiler/rank<N>/trace.json."""
    table = computes(nodes, seed, slow)
    world, slowest = nodes * PER_NODE, [max(column) for column in zip(*table)]
    outputs = {}
    for node in range(nodes):
        output = root / "nodes" / HOSTS[node] / OUTPUT
        for rank in range(node * PER_NODE, (node + 1) * PER_NODE):
            path = output / "torch_profiler" / f"rank{rank}" / "trace.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(rank_trace(rank, world, table, slowest), separators=(",", ":")))
        outputs[HOSTS[node]] = output
    return outputs


def earlier_files(output: Path, world: int) -> None:
    """What else a node's output directory may hold, which its collection does not take: an earlier
    run's trace of rank 1 (older than the run's start floor), a consolidated copy of rank 0 under
    combined_traces/, and a link to rank 2's trace. Each would name a rank or a file of its own."""
    table = [[COMPUTE_MS] * STEPS for _rank in range(world)]
    table[0] = table[1] = [2 * COMPUTE_MS] * STEPS
    stale = output / "torch_profiler" / "rank1" / "trace-0.json"  # sorts before the run's trace.json
    stale.write_text(json.dumps(rank_trace(1, world, table, table[0])))
    os.utime(stale, (FLOOR - 86400, FLOOR - 86400))
    copy = output / "combined_traces" / "node_0" / "torch_profiler" / "rank0" / "trace.json"
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps(rank_trace(0, world, table, table[0])))
    (output / "latest.json").symlink_to(output / "torch_profiler" / "rank2" / "trace.json")


def run_module(module, args: dict) -> dict:
    """A module's main() as Ansible runs it on a node: its arguments in, its JSON result out."""
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit) as ended:
        module.main()
    assert ended.value.code == 0, out.getvalue()[-2000:]
    return json.loads(out.getvalue())


def combined_tree(results: Path, outputs: dict) -> Path:
    """The controller's combined_traces: each node's new files packed on the node (trace_pack),
    then unpacked, verified against the node's list and given a manifest (combined_traces' action)."""
    nodes = []
    for rank, (host, output) in enumerate(outputs.items()):
        archive = str(results / ".staging" / f"node_{rank}.tar.gz")
        args = {"root": str(output), "since": FLOOR, "archive": archive, "compression": "gzip"}
        packed = run_module(trace_pack, args)
        nodes.append({"rank": rank, "name": host, "state": "ok", **packed})
    params = {"dest": str(results / "combined_traces"), "run_id": RUN_ID, "expected_ranks": len(nodes) * PER_NODE}
    result, failure = _combined.write(dict(params, nodes=nodes), check_mode=False)
    assert failure is None and result["manifest"]["nodes_not_collected"] == [], failure
    return results / "combined_traces"


def summarise_on_node(output: Path, dest: Path, monkeypatch) -> dict:
    """trace_summary on the node, with the standard library's decoder (a node without msgspec),
    writing its summary file; what its task result carries (the file's path, hash and figures)."""
    with monkeypatch.context() as patch:
        patch.setattr(_decode, "msgspec", None)
        return run_module(trace_summary, {"root": str(output), "since": FLOOR, "dest": str(dest)})["summary"]


def trace_parse(args: dict, hostvars: dict) -> dict:
    """trace_parse's action in-process, after a run of the 128 nodes."""
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="aorta.cluster.trace_parse")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    module = ActionModule(task, connection, SimpleNamespace(check_mode=False), None, templar)
    task_vars = {
        "groups": {"aorta_nodes": HOSTS},
        "hostvars": hostvars,
        "aorta_gpus_per_node": PER_NODE,
        # The run has a slow node, a slow rank and a regression on purpose: findings that fail the
        # verdict; what is compared here is the two ways' reports, not the task's exit.
        "aorta_verdict_ignores": ["slow_node", "straggler", "baseline_regression"],
    }
    result = module.run(task_vars=task_vars)
    assert not result.get("failed"), result.get("msg")
    return result


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    """An earlier healthy run (16 nodes, nobody slow) as the baseline report, made from full traces."""
    root = tmp_path_factory.mktemp("baseline")
    tree = combined_tree(root, node_outputs(root, 16, seed=5, slow=False))
    args = {"traces_dir": str(tree), "report_dir": str(root / "report"), "expected_ranks": 16 * PER_NODE}
    trace_parse(args, {})
    return root / "report" / "aorta_benchmark_report.json"


def report_of(result: dict) -> dict:
    return json.loads(Path(result["report"]).read_text())


def findings(report: dict) -> dict:
    """What the report names and judges, which both routes must say alike."""
    return {
        "slow_nodes": [(n["node"], n["ranks"]) for n in report["slow_nodes"]],
        "stragglers": [(s["rank"], s["node"]) for s in report["stragglers"]],
        "checks": {c["name"]: c["passed"] for c in report["validation"]["checks"]},
        "passed": report["validation"]["passed"],
        "baseline": report["baseline"]["verdict"],
        "verdict": report["verdict"]["verdict"],
        "status": report["status"],
        "ranks": [(r["rank"], r["node"]) for r in report["per_rank_summary"]],
        "missing_ranks": report["missing_ranks"],
        "duplicate_rank_files": report["duplicate_rank_files"],
        "errors": report["errors"],
    }


def test_the_report_from_node_summaries_is_the_full_trace_report(tmp_path, monkeypatch, baseline):
    outputs = node_outputs(tmp_path, NODES, seed=41, slow=True)
    earlier_files(outputs[HOSTS[0]], WORLD)
    results = tmp_path / "results"
    hostvars = {host: {"aorta_launch": {"nproc": PER_NODE}} for host in HOSTS}
    task = {"expected_results": EXPECTED, "baseline": str(baseline)}
    # (A) aorta_collect_traces: every node's traces on the controller, analysed there.
    tree = str(combined_tree(results, outputs))
    full = trace_parse(dict(task, traces_dir=tree, report_dir=str(results / "full")), hostvars)
    # (B) aorta_collect_traces sample or none: the same traces summarised where they lie, each
    # node's summary a file (none on the controller but those files); its task result stays small.
    for rank, (host, output) in enumerate(outputs.items()):
        kept = summarise_on_node(output, results / "node_summaries" / f"node_{rank}.json.gz", monkeypatch)
        assert len(json.dumps(kept)) < 1024 and kept["decoder"] == "json"
        hostvars[host]["aorta_end"] = {"summary": kept}
    elsewhere = str(tmp_path / "not-collected" / "combined_traces")
    summed = trace_parse(dict(task, traces_dir=elsewhere, report_dir=str(results / "summed")), hostvars)

    a, b = report_of(full), report_of(summed)
    for name in FIGURES:
        assert b["performance"][name] == pytest.approx(a["performance"][name], rel=0.005, abs=1e-9), name
    assert findings(b) == findings(a)
    # What both found is what was planted, and nothing of the files the collection leaves out.
    assert findings(a)["slow_nodes"] == [
        (HOSTS[SLOW_NODE], list(range(SLOW_NODE * PER_NODE, (SLOW_NODE + 1) * PER_NODE)))
    ]
    assert findings(a)["stragglers"] == [(STRAGGLER, HOSTS[STRAGGLER // PER_NODE])]
    assert findings(a)["checks"] == {
        "max_avg_iteration_ms": True,
        "min_compute_ratio": False,
        "min_overlap_ratio": False,
        "max_time_variance_ratio": True,
    }
    assert findings(a)["baseline"] == "regression" and findings(a)["status"] == "completed"
    assert len(a["per_rank_summary"]) == WORLD and a["duplicate_rank_files"] == [] == a["skipped_files"]
    assert [line for line in summed["headline_lines"] if line.startswith(("slow node", "straggler"))] == [
        f"slow node {HOSTS[SLOW_NODE]}",
        f"straggler rank {STRAGGLER}",
    ]
    # Each report says whose traces it holds in full, and the page says it too.
    assert (a["traces_in_full"], a["summaries_only"]) == (sorted(HOSTS), [])
    assert (b["traces_in_full"], b["summaries_only"]) == ([], sorted(HOSTS))
    page = Path(summed["html"]).read_text()
    assert "summaries only, made on the nodes (aorta_parse_on_nodes): 128 nodes (mi300x-0000, " in page
    assert "in full here: 128 nodes (mi300x-0000, " in Path(full["html"]).read_text()
