# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-rank report: the CVS-compatible aorta_benchmark_report.json from every rank's summary.

Private to this collection. Its parts live beside it: _thresholds (CVS's expected_results),
_stragglers (the test that names slow ranks), _baseline (a run against an earlier one) and
_render (the JSON, CSV and HTML files); the per-trace analysis is _analysis.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _decode, _findings, _timeline
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import (
    TIMELINE_ROWS,
    analyse_all,
    find_traces,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._baseline import (
    TOLERANCE,
    compare_baseline,
    stands_out,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import reason
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._render import (
    no_msgspec_warning,
    write_outputs,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import stragglers
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import (
    ReportError,
    check_thresholds,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import verdict

_NODE_DIR = re.compile(r"(?:^|/)(node_\d+)/")
# The nodes that took longest to analyse their own traces, named in node_analysis and on the page.
SLOWEST_NODES = 5


def _manifest(traces_dir: str) -> dict:
    """A combined_traces tree's manifest.json, else {} (any other folder, or none)."""
    try:
        with open(os.path.join(traces_dir, "manifest.json")) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _node_names(manifest: dict) -> dict:
    """``node_<rank>`` directory -> inventory name, from a combined_traces manifest."""
    return {f"node_{n['rank']}": n["name"] for n in manifest.get("nodes") or [] if "rank" in n and "name" in n}


def held(rows: list, manifest: dict, from_summaries: bool) -> dict:
    """Which nodes' traces the report holds in full and which only as summaries: ``traces_in_full``,
    the nodes whose whole traces lie in its traces folder (read here; with the nodes' summaries,
    those combined_traces collected all the same), and ``summaries_only``, the nodes of ``rows``
    known only from the summaries they made of their own traces (aorta_collect_traces sample, none)."""
    nodes = sorted({str(r["node"]) for r in rows})
    if not from_summaries:
        return {"traces_in_full": nodes, "summaries_only": []}
    entries = [n for n in manifest.get("nodes") or [] if isinstance(n, dict) and "name" in n]
    collected = {str(n["name"]) for n in entries if n.get("collected") and n.get("files")}
    return {"traces_in_full": sorted(collected), "summaries_only": [n for n in nodes if n not in collected]}


def _rank_order(row: dict) -> tuple:
    """A node_analysis row's place: by rank, a row without an integer rank last, then by name."""
    rank = row.get("rank")
    return (0, rank, str(row.get("node"))) if isinstance(rank, int) else (1, 0, str(row.get("node")))


def node_analysis(rows) -> dict | None:
    """The report's ``node_analysis``, from the task's rows of the nodes that analysed their own
    traces (one each: node, rank, decoder, analysis_s, files, bytes, peak_rss_mb): how many, those
    with the standard library's decoder (no msgspec) by rank, the SLOWEST_NODES slowest rows as
    given, the median and longest analysis time and the bytes analysed; None without a row (a
    report from full traces)."""
    rows = sorted((r for r in rows or [] if isinstance(r, dict)), key=_rank_order)
    if not rows:
        return None
    timed = [r for r in rows if isinstance(r.get("analysis_s"), (int, float))]
    times = [float(r["analysis_s"]) for r in timed]
    return {
        "nodes": len(rows),
        "without_msgspec": [str(r.get("node")) for r in rows if r.get("decoder") == "json"],
        # Stable: of equal times, the lower rank first.
        "slowest": [dict(r) for r in sorted(timed, key=lambda r: r["analysis_s"], reverse=True)[:SLOWEST_NODES]],
        "analysis_s": {"median": statistics.median(times) if times else None, "max": max(times, default=None)},
        "bytes": sum(int(r["bytes"]) for r in rows if isinstance(r.get("bytes"), (int, float))),
    }


def _node_of(path: str, traces_dir: str, names: dict) -> str:
    rel = os.path.relpath(path, traces_dir)
    match = _NODE_DIR.search("/" + rel)
    if match:
        return str(names.get(match.group(1), match.group(1)))
    return os.path.dirname(rel) or "."


def _no_trace(traces_dir: str, skipped: list, errors: list, from_summaries: bool) -> str:
    """The one line for a report with nothing to report on, naming the folder and what was there."""
    where = "the nodes' summaries" if from_summaries else traces_dir
    found = []
    if skipped:
        found.append(f"{len(skipped)} JSON file(s) that are not profiler traces, e.g. {skipped[0]['file']}")
    if errors:
        found.append(f"{len(errors)} unreadable: {errors[0]['error']}")
    detail = f" ({'; '.join(found)})" if found else " (no *.json or *.json.gz file)"
    return f"aorta_traces_dir: no trace found in {where}{detail}"


# nccl-tests' bus bandwidth: algorithm bandwidth (size / time) times the share of the data each
# rank's links carry (nccl-tests PERFORMANCE.md); n is the group's size.
_BUS_FACTORS = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
TOP_KERNELS_SHOWN = 20


def bus_factor(op: str, group_size) -> float | None:
    """nccl-tests' busBw / algBw for a collective named like Kineto's ``Collective name``."""
    # allreduce, _allgather_base, allgather_into_tensor_coalesced, reduce_scatter_tensor, all_to_all...
    key = re.sub(r"[^a-z]|base|coalesced|into|tensor", "", str(op).lower())
    factor = _BUS_FACTORS.get(key)
    try:
        n = int(group_size)
    except (TypeError, ValueError):
        return None
    return factor(n) if factor and n >= 1 else None


def collective_table(summaries: list) -> list:
    """Every rank's collectives by (op, size, group): calls, time, mean, and the bandwidths
    nccl-tests reports (algbw = size / mean time, busbw = algbw x its factor), longest first."""
    rows: dict = {}
    for s in summaries:
        for op, item in (s.get("collectives") or {}).items():
            for key, (count, total_us) in (item.get("by_size") or {}).items():
                size, _slash, group = key.partition("/")
                row = rows.setdefault((op, int(size), group), [0, 0.0])
                row[0] += count
                row[1] += total_us
    table = []
    for (op, size, group), (count, total_us) in rows.items():
        mean_s = total_us / count / 1e6 if count else 0.0
        algbw = size / mean_s / 1e9 if mean_s > 0 else None
        factor = bus_factor(op, group)
        table.append(
            {
                "op": op,
                "size_bytes": size,
                "group_size": int(group) if group.isdigit() else None,
                "count": count,
                "time_ms": round(total_us / 1000.0, 6),
                "mean_ms": round(mean_s * 1000.0, 6),
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * factor if algbw is not None and factor is not None else None,
            }
        )
    return sorted(table, key=lambda r: (-r["time_ms"], r["op"], r["size_bytes"]))


def top_kernels(summaries: list) -> list:
    """The GPU events that took longest over every rank, by name: count, total, mean and share of
    all counted GPU time but memcpy (TraceLens' and HTA's first table)."""
    merged: dict = {}
    for s in summaries:
        for name, count, total_ms in s.get("top_kernels") or []:
            row = merged.setdefault(name, [0, 0.0])
            row[0] += count
            row[1] += total_ms
    everything = sum(
        v for s in summaries for k, v in (s.get("kernel_time_by_category_ms") or {}).items() if k != "memcpy"
    )
    rows = sorted(merged.items(), key=lambda item: -item[1][1])[:TOP_KERNELS_SHOWN]
    return [
        {
            "name": name,
            "count": count,
            "total_ms": round(total, 6),
            "mean_us": round(total * 1000.0 / count, 3) if count else None,
            "share": total / everything if everything else None,
        }
        for name, (count, total) in rows
    ]


def kernel_categories(summaries: list) -> dict:
    """Kernel time by category (TraceLens' classes), summed over every rank, in ms."""
    out: dict = {}
    for s in summaries:
        for category, ms in (s.get("kernel_time_by_category_ms") or {}).items():
            out[category] = out.get(category, 0.0) + ms
    return {k: round(v, 6) for k, v in sorted(out.items(), key=lambda item: -item[1])}


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def build_report(
    traces_dir: str,
    *,
    include_unlinked_kernels=False,
    expected_results=None,
    gpus_per_node=None,
    configuration=None,
    straggler_threshold=0.10,
    max_workers=None,
    summaries=None,
    expected_ranks=None,
    duration_seconds=None,
    clock_offsets=None,
    node_analysis_rows=None,
) -> dict:
    """The whole report for a directory of traces (a combined_traces tree or any folder)."""
    if summaries is None and not os.path.isdir(traces_dir):
        raise ReportError(f"aorta_traces_dir: {traces_dir} is not a directory")
    manifest = _manifest(traces_dir)
    names = _node_names(manifest)
    summaries_given = summaries is not None
    if summaries is None:
        summaries = analyse_all(find_traces(traces_dir), include_unlinked_kernels, max_workers)
    summaries, errors, skipped, paired = _sort_out(summaries)
    # Said, never a report of zeros: a bare folder's report fails with this line (run_task); after
    # a run, the report still says why it stopped, with this line among its errors.
    no_trace = (
        "" if [s for s in summaries if "error" not in s] else _no_trace(traces_dir, skipped, errors, summaries_given)
    )
    if no_trace:
        errors.append({"file": traces_dir, "error": no_trace})
    ranks, seen, duplicates, unranked, source = _rank_rows(summaries, traces_dir, names, expected_ranks)
    analysed = node_analysis(node_analysis_rows)
    warnings = _run_warnings(summaries, analysed)
    world = expected_ranks or max([s.get("world_size") or 0 for s in summaries if "error" not in s] + [len(ranks)])
    missing = [r for r in range(world) if r not in seen]
    nodes = sorted({r["node"] for r in ranks})
    performance = _performance(ranks)
    # A one-process run has no peers to compare: its trace gives no straggler evidence.
    evidence = {r["rank"]: source[id(r)] for r in ranks if not r.get("single_process")}
    slow, slow_nodes, straggler_test = stragglers(ranks, straggler_threshold, evidence)
    timeline = _timeline.merge(
        {r["rank"]: (r["node"], source[id(r)]["timeline"]) for r in ranks if source[id(r)].get("timeline")},
        clock_offsets,
    )
    checks = check_thresholds(performance, expected_results or {})
    per_node = max(1, len(ranks) // max(len(nodes), 1))
    gpn = gpus_per_node or per_node
    status = "completed" if ranks and not missing and not errors else ("partial" if ranks else "failed")
    return {
        "status": status,
        "duration_seconds": duration_seconds,
        "cluster": {"nodes": len(nodes), "gpus_per_node": gpn, "total_gpus": len(nodes) * gpn},
        "configuration": dict(configuration or {}),
        "performance": performance,
        "validation": {"passed": all(c["passed"] for c in checks), "checks": checks},
        "per_rank_summary": ranks,
        "unranked_traces": unranked,
        **held(ranks + unranked, manifest, summaries_given),
        "node_analysis": analysed,
        "stragglers": slow,
        "straggler_test": straggler_test,
        "_timeline": timeline,
        "slow_nodes": slow_nodes,
        # From run.json's fabric sweep (run_task): none without a run record.
        "fabric_sweep": None,
        "slow_links": [],
        "missing_ranks": missing,
        "duplicate_rank_files": duplicates,
        **_rank_tables([source[id(r)] for r in ranks]),
        "skipped_files": skipped,
        # Aorta's pair (TensorBoard and Chrome trace of one window): each window analysed once.
        "paired_files": paired,
        "warnings": warnings,
        "no_trace": no_trace,
        "errors": errors,
        "counting": "include_unlinked_kernels" if include_unlinked_kernels else "linked_kernels (TraceLens default)",
    }


def _sort_out(summaries: list) -> tuple:
    """(the summaries to report on, the failed ones, the skipped files, the paired copies): the
    first keeps the failed ones, which the report counts among its errors."""
    errors = [{"file": s["file"], "error": s["error"]} for s in summaries if "error" in s]
    skipped = [{"file": s["file"], "reason": s["skipped"]} for s in summaries if "skipped" in s]
    paired = [{"file": s["file"], "paired_with": s["paired_with"]} for s in summaries if "paired_with" in s]
    summaries = [s for s in summaries if "skipped" not in s and "paired_with" not in s]
    return summaries, errors, skipped, paired


def _rank_rows(summaries: list, traces_dir: str, names: dict, expected_ranks) -> tuple:
    """(rank rows by rank, the ranks seen, files of a rank seen already, rows of traces without a
    rank, id(row) -> the summary it came from) of the summaries that did not fail."""
    ranks, seen, duplicates, unranked = [], set(), [], []
    # id(row) -> the summary it came from: its per-step evidence and timeline part stay out of the
    # report (8 ranks x 4096 steps per node adds up) but feed the straggler test and timeline.json.
    source = {}
    for s in sorted(
        (s for s in summaries if "error" not in s), key=lambda s: (s["rank"] is None, s["rank"], s["file"])
    ):
        if s["rank"] is None:
            # A single-process trace has no distributedInfo: analysed, but not guessed into a rank.
            unranked.append(_rank_row(s, s.get("node") or _node_of(s["file"], traces_dir, names), traces_dir))
            source[id(unranked[-1])] = s
            continue
        if s["rank"] in seen:
            duplicates.append(s["file"])
            continue
        seen.add(s["rank"])
        # Summaries made on the nodes carry their node; files read here get it from the tree.
        ranks.append(_rank_row(s, s.get("node") or _node_of(s["file"], traces_dir, names), traces_dir))
        source[id(ranks[-1])] = s
    if not ranks and len(unranked) == 1 and not expected_ranks:
        # One trace without distributedInfo (TraceLens' most common input) is one rank of a
        # one-process run: rank 0 of 1, not a failed report. Several are not guessed into ranks.
        only = unranked.pop()
        ranks, seen = [dict(only, rank=0, single_process=True)], {0}
        source[id(ranks[0])] = source[id(only)]
    return ranks, seen, duplicates, unranked, source


def _run_warnings(summaries: list, analysed: dict | None = None) -> list:
    """The report's warnings: traces of more than one run (world size) in one folder; nodes that
    analysed their own traces without msgspec (``analysed``: node_analysis), one warning for all."""
    sizes: dict = {}
    for s in summaries:
        if "error" not in s and s.get("world_size"):
            sizes[s["world_size"]] = sizes.get(s["world_size"], 0) + 1
    warnings = []
    if len(sizes) > 1:
        # Traces of more than one run in one folder: their ranks would be mixed into one report.
        warnings.append(
            "traces of more than one run: world size "
            + " and ".join(f"{size} ({count} traces)" for size, count in sorted(sizes.items()))
        )
    if analysed and analysed["without_msgspec"]:
        warnings.append(no_msgspec_warning(analysed["without_msgspec"]))
    return warnings


def _performance(ranks: list) -> dict:
    """The report's performance block: CVS's window figures, the per-step ones and the mean ratios."""
    iteration_means = [r["iteration_time_ms"] for r in ranks if r["iteration_time_ms"] is not None]
    windows_ms = [r["total_time_us"] / 1000.0 for r in ranks if r.get("total_time_us") is not None]
    return {
        # CVS's figures, so its thresholds mean the same here: per rank the profiled window's total
        # time (not one step's), averaged over ranks, and its spread across ranks.
        "avg_iteration_time_ms": _mean(windows_ms),
        "std_iteration_time_us": (statistics.stdev(windows_ms) * 1000.0 if len(windows_ms) > 1 else 0.0)
        if windows_ms
        else None,
        # The clearer per-step figures: the mean step time (ProfilerStep#N) averaged over ranks.
        "avg_step_time_ms": _mean(iteration_means),
        "std_step_time_us": (statistics.stdev(iteration_means) * 1000.0 if len(iteration_means) > 1 else 0.0)
        if iteration_means
        else None,
        "avg_compute_ratio": _mean([r["compute_ratio"] for r in ranks]),
        "avg_comm_ratio": _mean([r["comm_ratio"] for r in ranks]),
        "avg_overlap_ratio": _mean([r["overlap_ratio"] for r in ranks]),
    }


def _rank_tables(rank_summaries: list) -> dict:
    """The report's tables over the ranks' summaries: top kernels, kernel time by category, collectives."""
    return {
        "top_kernels": top_kernels(rank_summaries),
        "kernel_time_by_category_ms": kernel_categories(rank_summaries),
        "collective_table": collective_table(rank_summaries),
    }


def _rank_row(s: dict, node: str, traces_dir: str) -> dict:
    return {
        "rank": s["rank"],
        "node": node,
        "file": s["file"] if s.get("node") else os.path.relpath(s["file"], traces_dir),
        "gpu": s["gpu"],
        "total_time_us": s["total_time_ms"] * 1000.0,
        # The rank's mean step (one ProfilerStep#N). iteration_time_ms is the same value under its
        # older name, a deprecated alias kept for readers of earlier reports: CVS's "iteration" is
        # the whole profiled window (total_time_us here, avg_iteration_time_ms in performance).
        "step_time_ms": s["iterations"]["mean"],
        "iteration_time_ms": s["iterations"]["mean"],
        "iterations": s["iterations"],
        "compute_ratio": s["compute_ratio"],
        "comm_ratio": s["comm_ratio"],
        "overlap_ratio": s["overlap_ratio"],
        "compute_per_iteration_ms": s["compute_per_iteration_ms"] if s["iterations"]["count"] else None,
        "comm_wait_per_iteration_ms": s["comm_wait_per_iteration_ms"] if s["iterations"]["count"] else None,
        "comm_time_ms": s["comm_time_ms"],
        "exposed_comm_time_ms": s["exposed_comm_time_ms"],
        "gpu_timeline": s["gpu_timeline"] or {row: None for row in TIMELINE_ROWS},
        "kernel_time_by_category_ms": s["kernel_time_by_category_ms"],
        "collectives": s["collectives"],
    }


# The task's options, shared by the trace_parse module and its action plugin (which runs the same
# work in the controller's own Python, whatever the hosts' ansible_python_interpreter).
TASK_ARGUMENT_SPEC = {
    "traces_dir": {"type": "path", "required": True},
    "summaries": {"type": "list", "elements": "dict"},
    # One row per node that analysed its own traces (trace_summary): node, rank, decoder ("msgspec" or
    # "json"), analysis_s, files, bytes, peak_rss_mb; the report's node_analysis.
    "node_analysis": {"type": "list", "elements": "dict"},
    # The run's collection when the nodes analysed their own traces: mode, why, and for sample the
    # pull after the report (seed, sample_nodes, budget_gb); the report states it.
    "collection": {"type": "dict"},
    "report_dir": {"type": "path", "required": True},
    "include_unlinked_kernels": {"type": "bool", "default": False},
    "expected_results": {"type": "dict", "default": {}},
    "fail_on_threshold": {"type": "bool", "default": False},
    "fail_on_findings": {"type": "bool", "default": False},
    "verdict_ignores": {"type": "list", "elements": "str", "default": []},
    "gpus_per_node": {"type": "int"},
    "expected_ranks": {"type": "int"},
    "configuration": {"type": "dict", "default": {}},
    "straggler_threshold": {"type": "float", "default": 0.1},
    "max_workers": {"type": "int"},
    "duration_seconds": {"type": "float"},
    "diagnosis": {"type": "dict"},
    "baseline": {"type": "path"},
    "baseline_tolerance": {"type": "float", "default": TOLERANCE},
    # Why the baseline was chosen (aorta_baseline: auto), why none was, or how a named one differs.
    "baseline_context": {"type": "dict"},
    "clock_offsets": {"type": "dict", "default": {}},
    "run_json": {"type": "path"},
}


def read_run_record(traces_dir: str, run_json: str | None) -> tuple:
    """(run.json's content or None, its path or ''): the given file, else the one beside the traces."""
    path = run_json or os.path.join(os.path.dirname(os.path.abspath(traces_dir.rstrip("/"))), "run.json")
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        if run_json:
            raise ReportError(f"run_json: {run_json} is not a readable run.json") from None
        return None, ""
    return (record, path) if isinstance(record, dict) and "run_id" in record else (None, "")


def run_summary(record: dict | None, path: str, report: dict) -> dict:
    """What a performance engineer reads first, before any chart: the run's own status (not the
    analysis'), id, times, what ran and with what, and the throughput the steps give."""
    if not record:
        return {"record": None, "status": None, "note": "no run record: a folder of traces, not a run's results"}
    context = record.get("context") or {}
    settings = context.get("settings") or {}
    started, finished = record.get("started_epoch"), record.get("finished_epoch")
    duration = finished - started if isinstance(started, (int, float)) and isinstance(finished, (int, float)) else None
    step_ms = report["performance"].get("avg_step_time_ms")
    ranks = len(report["per_rank_summary"])
    batch, sequence = settings.get("batch_size"), settings.get("sequence_length")
    # Aorta is data-parallel over every rank (FSDP) and steps the optimizer once per batch.
    samples = batch * ranks / (step_ms / 1000.0) if batch and step_ms and ranks else None
    return {
        "record": path,
        "status": record.get("status"),
        "message": record.get("message"),
        "run_id": record.get("run_id"),
        "started_epoch": started,
        "finished_epoch": finished,
        "duration_seconds": duration,
        "image": context.get("image"),
        "image_id": context.get("image_id"),
        "base_config": context.get("base_config"),
        "overrides": context.get("overrides"),
        "launch_mode": context.get("launch_mode"),
        "head": record.get("head"),
        "master": f"{record['master_addr']}:{record.get('master_port')}" if record.get("master_addr") else None,
        "nodes": context.get("nodes", len(record.get("nodes") or [])),
        # Left out by preflight (aorta_exclude_unhealthy) and the fingerprint fields that differ.
        "excluded": [
            {"name": e.get("name"), "reason": (e.get("reasons") or [""])[0]} for e in record.get("excluded") or ()
        ],
        "drift": [
            f"{d.get('label')}: {d.get('count')} of {d.get('of')} nodes differ" for d in record.get("drift") or ()
        ],
        "gpus_per_node": context.get("gpus_per_node"),
        "batch_size": batch,
        "sequence_length": sequence,
        "data_parallel_ranks": ranks,
        "samples_per_second": samples,
        "tokens_per_second": samples * sequence if samples and sequence else None,
        "note": settings.get("note")
        or ("" if samples else "no throughput: the batch size or the step time is not known"),
    }


def fabric_sweep_summary(record: dict | None) -> dict | None:
    """The report's ``fabric_sweep``: run.json's fabric sweep before the ranks started, summed up
    (each node's figures stay in run.json): whether it ran (else why not), its tool, length,
    threshold, minimum, median, whether it could localise (else why not) and how many nodes it
    named, could not localise and did not measure; None without a run record or for one of an
    earlier version (no ``fabric_sweep``)."""
    sweep = (record or {}).get("fabric_sweep")
    if not isinstance(sweep, dict):
        return None
    if not sweep.get("ran"):
        return {"ran": False, "why": str(sweep.get("why") or "not recorded")}
    return {
        "ran": True,
        **{key: sweep.get(key) for key in ("tool", "seconds", "threshold", "min_gbps", "median_gbps")},
        "localisable": sweep.get("localisable"),
        "reason": sweep.get("reason"),
        "rounds": len(_listed(sweep, "rounds")),
        "slow_count": _count(sweep, "slow"),
        "unresolved_count": _count(sweep, "unresolved"),
        "not_measured_count": _count(sweep, "not_measured"),
    }


def _listed(sweep: dict, key: str) -> list:
    value = sweep.get(key)
    return value if isinstance(value, list) else []


def _count(sweep: dict, key: str) -> int:
    """``<key>_count`` as run.json has it, else the length of its list ``key``."""
    value = sweep.get(f"{key}_count")
    return value if isinstance(value, int) and not isinstance(value, bool) else len(_listed(sweep, key))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def worst_busbw(table: list) -> tuple:
    """(op, bus bandwidth in GB/s) of the collective op whose calls moved the fewest bus bytes per
    second: per op, over its sizes and groups, the sum of size x calls x nccl-tests' factor over
    its kernel time (each row's busbw_gbps weighted by its time, so that a few tiny calls, bound by
    latency, do not speak for the op); (None, None) without a collective of known size and factor."""
    moved: dict = {}
    spent: dict = {}
    for row in table:
        factor = bus_factor(row["op"], row.get("group_size"))
        if factor is None or not row.get("time_ms"):
            continue
        moved[row["op"]] = moved.get(row["op"], 0.0) + row["size_bytes"] * row["count"] * factor
        spent[row["op"]] = spent.get(row["op"], 0.0) + row["time_ms"] / 1000.0
    rates = {op: moved[op] / spent[op] / 1e9 for op in moved}
    if not rates:
        return None, None
    op = min(rates, key=lambda name: (rates[name], name))
    return op, rates[op]


def node_collective_times(ranks: list, per_node: int | None = None) -> dict:
    """{node: the median over its ranks of the time each spends in collectives (comm_time_ms)}, a
    rank's node its row's, or with ``per_node`` its node rank: ranks are laid out node by node
    (rank // ranks per node)."""
    spent_by_node: dict = {}
    for row in ranks:
        spent = _number(row.get("comm_time_ms"))
        if spent is None or not isinstance(row.get("rank"), int):
            continue
        node = row["rank"] // per_node if per_node else str(row.get("node"))
        spent_by_node.setdefault(node, []).append(spent)
    return {node: statistics.median(values) for node, values in spent_by_node.items()}


def collective_ratio(nodes: dict, node) -> float | None:
    """``node``'s time in collectives against the median node's (``nodes``: node_collective_times);
    None when the traces hold no communication, the node has no rank here, or there are fewer than
    two nodes."""
    if node not in nodes or len(nodes) < 2:
        return None
    middle = statistics.median(nodes.values())
    return round(nodes[node] / middle, 3) if middle > 0 else None


def slow_links(sweep, report: dict) -> list:
    """The report's ``slow_links``: one entry per node run.json's fabric sweep named slow, with its
    sweep figures, the time its ranks spend in collectives against the median node's
    (``collective_ratio``) and the worst collective op's bus bandwidth, in Gbit/s, against the
    sweep's median (``busbw_ratio``, ``busbw_op``); [] when the sweep did not run or named nobody."""
    if not isinstance(sweep, dict) or not sweep.get("ran"):
        return []
    median = _number(sweep.get("median_gbps"))
    op, busbw = worst_busbw(report.get("collective_table") or [])
    busbw_ratio = round(busbw * 8.0 / median, 3) if busbw is not None and median else None
    per_node = (report.get("run") or {}).get("gpus_per_node") or (report.get("cluster") or {}).get("gpus_per_node")
    ranks = report.get("per_rank_summary") or []
    # A node is found by its name among the ranks' nodes, else by its node rank.
    by_name = node_collective_times(ranks)
    by_rank = node_collective_times(ranks, per_node) if isinstance(per_node, int) and per_node > 0 else {}
    links = []
    for item in (i for i in _listed(sweep, "slow") if isinstance(i, dict)):
        name, rank = str(item.get("node")), item.get("rank")
        ratio = collective_ratio(by_name, name) if name in by_name else collective_ratio(by_rank, rank)
        links.append(
            {
                "node": item.get("node"),
                "node_rank": rank,
                "direction": item.get("direction"),
                "send_gbps": item.get("send_gbps"),
                "recv_gbps": item.get("recv_gbps"),
                "median_gbps": item.get("median_gbps", median),
                "ratio": item.get("ratio"),
                "collective_ratio": ratio,
                "busbw_ratio": busbw_ratio,
                "busbw_op": op if busbw_ratio is not None else None,
            }
        )
    return links


def fabric_findings(record: dict | None, report: dict) -> dict:
    """The report's ``fabric_sweep`` and ``slow_links`` from run.json (``record``) and the traces'
    figures in ``report`` (its ranks, collectives and run)."""
    sweep = (record or {}).get("fabric_sweep")
    return {"fabric_sweep": fabric_sweep_summary(record), "slow_links": slow_links(sweep, report)}


def run_task(p: dict, check_mode: bool = False) -> tuple:
    """The trace_parse task: (result, failure message or '')."""
    expected = {k: v for k, v in (p["expected_results"] or {}).items() if v is not None}
    try:
        record, record_path = read_run_record(p["traces_dir"], p.get("run_json"))
        report = build_report(
            p["traces_dir"],
            include_unlinked_kernels=p["include_unlinked_kernels"],
            expected_results=expected,
            gpus_per_node=p["gpus_per_node"],
            configuration=p["configuration"],
            max_workers=p["max_workers"],
            straggler_threshold=p["straggler_threshold"],
            expected_ranks=p["expected_ranks"],
            duration_seconds=p["duration_seconds"],
            summaries=p["summaries"],
            clock_offsets=p.get("clock_offsets") or {},
            node_analysis_rows=p.get("node_analysis"),
        )
    except ReportError as exc:
        return {"changed": False}, str(exc)
    if report["no_trace"] and not p.get("diagnosis") and not record:
        return {"changed": False, "status": "failed", "skipped_files": report["skipped_files"]}, report["no_trace"]
    report["run"] = run_summary(record, record_path, report)
    report.update(fabric_findings(record, report))
    if report["duration_seconds"] is None:
        report["duration_seconds"] = report["run"].get("duration_seconds")
    report["collection"] = p.get("collection")
    if p.get("diagnosis"):
        report["diagnosis"] = p["diagnosis"]
    context = p.get("baseline_context") or {}
    if p.get("baseline"):
        try:
            report["baseline"] = compare_baseline(report, p["baseline"], p.get("baseline_tolerance", TOLERANCE))
        except ReportError as exc:
            return {"changed": False}, str(exc)
        report["baseline"].update(chosen=context.get("chosen", ""), differences=context.get("differences") or [])
        if report["baseline"]["verdict"] == "regression":
            report["baseline"]["stands_out"] = stands_out(report)
    elif context.get("reason"):
        report["baseline"] = not_compared(context["reason"], p.get("baseline_tolerance", TOLERANCE))
    # Judged last: the baseline's regression is one of the findings.
    found = _findings.found(record, None if report["no_trace"] else report)
    report["verdict"] = verdict(
        record.get("status") if record else None,
        record.get("message") if record else None,
        report["validation"]["checks"],
        # A report of no trace (the run stopped before its profiler wrote one) judges no threshold.
        not report["no_trace"],
        found,
        p.get("verdict_ignores") or (),
    )
    report["tools"] = tool_notes()
    result = {
        "changed": not check_mode,
        "status": report["status"],
        "performance": report["performance"],
        "run": report["run"],
        "stragglers": report["stragglers"],
        "slow_nodes": report["slow_nodes"],
        "validation": report["validation"],
        "missing_ranks": report["missing_ranks"],
        "errors": report["errors"],
        # Not "warnings": Ansible takes a result's warnings for its own (shows and drops them).
        "report_warnings": report["warnings"],
        "skipped_files": report["skipped_files"],
        "tools": report["tools"],
        "baseline": report.get("baseline"),
        "verdict": report["verdict"],
    }
    if not check_mode:
        try:
            result.update(write_outputs(report, p["report_dir"]))
        except OSError as exc:
            return result, f"cannot write the report into {p['report_dir']}: {exc.strerror}"
    return result, task_failure(report, found, p)


def task_failure(report: dict, found: dict, p: dict) -> str:
    """Why the task fails ('' when it does not): a threshold not met with ``fail_on_threshold``, a
    finding the verdict counted with ``fail_on_findings`` (a folder of traces given alone; after a
    run, run_outcome fails the play once everything is written)."""
    problems = []
    if p["fail_on_threshold"] and not report["validation"]["passed"]:
        failed = [c["reason"] for c in report["validation"]["checks"] if not c["passed"]]
        problems.append("thresholds not met: " + "; ".join(failed))
    kinds = report["verdict"]["findings"]
    if p.get("fail_on_findings") and kinds:
        problems.append("found: " + "; ".join(reason(kind, found[kind]) for kind in kinds))
    return "; ".join(problems)


def not_compared(reason: str, tolerance: float) -> dict:
    """``baseline`` when no run could be compared with (``aorta_baseline: auto`` found none): why."""
    return {
        "source": None,
        "tolerance": tolerance,
        "noise_ms": None,
        "metrics": {},
        "verdict": "not compared",
        "reason": reason,
        "chosen": "",
        "differences": [],
    }


def tool_notes() -> dict:
    """What this Python has for the report: the fast decoder (msgspec)."""
    fast = _decode.msgspec is not None
    notes = []
    if not fast:
        notes.append("slow decoding: msgspec is not installed in the controller's Python (pip install msgspec)")
    return {"python": sys.executable, "fast_decoder": fast, "notes": notes}
