# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-rank report: the CVS-compatible aorta_benchmark_report.json from every rank's summary.

Private to this collection; controller side. Its parts: module_utils' trace_analysis (the per-trace
analysis, _thresholds for CVS's expected_results, _stragglers, _baseline), _run_facts (what run.json
adds), _task (the trace_parse task), _outputs (the files) and pages (report.html).
"""

from __future__ import annotations

import json
import os
import re
import statistics

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _timeline
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import (
    TIMELINE_ROWS,
    analyse_all,
    find_traces,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import stragglers
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import (
    ReportError,
    check_thresholds,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._opening import no_msgspec_warning

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
