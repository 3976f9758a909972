# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cross-rank report: CVS-compatible aorta_benchmark_report.json, stragglers, thresholds, CSV, HTML.

Private to this collection. Standard library only, except the plots (matplotlib, when installed).
"""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import math
import os
import re
import statistics
import sys

from ansible.module_utils.common.validation import check_type_dict

from ansible_collections.aorta.cluster.plugins.module_utils import _analysis, _timeline
from ansible_collections.aorta.cluster.plugins.module_utils._analysis import TIMELINE_ROWS, analyse_all, find_traces

THRESHOLDS = ("max_avg_iteration_ms", "min_compute_ratio", "min_overlap_ratio", "max_time_variance_ratio")
# What each threshold may be, as CVS accepts them: (low, high, whether low itself is allowed).
THRESHOLD_RANGES = {
    "max_avg_iteration_ms": (0.0, math.inf, False),
    "min_compute_ratio": (0.0, 1.0, True),
    "min_overlap_ratio": (0.0, 1.0, True),
    "max_time_variance_ratio": (0.0, math.inf, True),
}
_NODE_DIR = re.compile(r"(?:^|/)(node_\d+)/")


class ReportError(Exception):
    """Bad input to the report (unknown threshold, no such directory); the message names it."""


def _node_names(traces_dir: str) -> dict:
    """``node_<rank>`` directory -> inventory name, from a combined_traces manifest when there is one."""
    try:
        with open(os.path.join(traces_dir, "manifest.json")) as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return {}
    return {f"node_{n['rank']}": n["name"] for n in manifest.get("nodes", []) if "rank" in n and "name" in n}


def _node_of(path: str, traces_dir: str, names: dict) -> str:
    rel = os.path.relpath(path, traces_dir)
    match = _NODE_DIR.search("/" + rel)
    if match:
        return str(names.get(match.group(1), match.group(1)))
    return os.path.dirname(rel) or "."


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


STRAGGLER_ALPHA = 0.05  # family-wise: the chance that noise alone names some rank


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _slowest_counts(table: list, ranks: set, higher_is_slower: bool, margin: float) -> dict:
    """Per rank of ``ranks``, in how many rows of ``table`` ({rank: value}) it is alone at the slow end
    among ``ranks`` and, with ``margin``, beyond the whole row's median by more than that ratio."""
    counts: dict = {}
    for row in table:
        values = {r: v for r, v in row.items() if r in ranks}
        if len(values) < 2:
            continue
        worst = (max if higher_is_slower else min)(values.values())
        if list(values.values()).count(worst) != 1:
            continue  # a tie names nobody
        median = statistics.median(row.values())
        if margin and (median <= 0 or worst / median <= 1 + margin):
            continue
        rank = next(r for r, v in values.items() if v == worst)
        counts[rank] = counts.get(rank, 0) + 1
    return counts


def _p_value(count: int, trials: int, candidates: int) -> float:
    """Bonferroni over the candidates: the chance noise makes any of them alone-slowest ``count`` times."""
    if not trials or candidates < 2:
        return 1.0
    return min(1.0, candidates * _binomial_tail(count, trials, 1 / candidates))


def stragglers(ranks: list, threshold: float, evidence: dict | None = None, alpha: float = STRAGGLER_ALPHA) -> tuple:
    """Ranks that hold the others back, most certain first; nodes slow as a whole; the test's record.

    Per profiled step (same step number on every rank), the rank alone the slowest, by more than
    ``threshold`` over the step's median compute, scores one; per collective (same order on every
    rank), the rank that waits least arrived last and scores one. Under noise alone each of N ranks
    is the slowest with chance 1/N, so k of n is a binomial tail, Bonferroni-corrected over the N
    ranks: noise names somebody with chance below ``alpha``. A rank is named when either count is
    that unlikely and its median compute exceeds the others' by more than ``threshold``; then the
    test repeats without it (step-down), so several stragglers are found one by one.
    """
    evidence = evidence or {}
    by_rank = {r["rank"]: r for r in ranks}
    steps = {}
    for rank, item in evidence.items():
        if rank in by_rank and item.get("step_compute_ms"):
            steps[rank] = {int(k): v for k, v in item["step_compute_ms"]}
    test: dict = {"alpha": alpha, "threshold": threshold, "ranks": len(steps), "steps": 0, "collectives": 0}
    if len(steps) < 2:
        test["verdict"] = "not tested: fewer than two ranks with profiled steps"
        return [], [], test
    count = len(steps)
    common = sorted(set.intersection(*(set(v) for v in steps.values())))
    table = [{r: steps[r][k] for r in steps} for k in common]
    # A step that barely ran (the profiler's closing step) is no evidence.
    typical = statistics.median(statistics.median(row.values()) for row in table) if table else 0.0
    table = [row for row in table if typical > 0 and statistics.median(row.values()) >= 0.05 * typical]
    waits = {r: (evidence[r].get("collective_ms") or []) for r in steps}
    n_coll = min(len(w) for w in waits.values())
    arrivals = [{r: waits[r][i] for r in steps} for i in range(n_coll)]
    need = next((n for n in range(1, 64) if count * (1 / count) ** n < alpha), None)
    test.update(steps=len(table), collectives=n_coll, steps_needed=need)
    excess = {}
    for rank in steps:
        ratios = [row[rank] / statistics.median(row.values()) for row in table if statistics.median(row.values()) > 0]
        excess[rank] = statistics.median(ratios) - 1.0 if ratios else 0.0
    compute_median = statistics.median(r.get("compute_per_iteration_ms") or 0 for r in ranks)
    wait_median = statistics.median(r.get("comm_wait_per_iteration_ms") or 0 for r in ranks)
    slow, remaining = [], set(steps)
    while len(remaining) >= 2:
        slow_steps = _slowest_counts(table, remaining, True, threshold)
        last = _slowest_counts(arrivals, remaining, False, 0.0)
        candidates = []
        for rank in remaining:
            p_steps = _p_value(slow_steps.get(rank, 0), len(table), len(remaining))
            p_last = _p_value(last.get(rank, 0), n_coll, len(remaining))
            if excess[rank] > threshold and min(p_steps, p_last) < alpha:
                candidates.append((min(p_steps, p_last), -excess[rank], rank, p_steps, p_last))
        if not candidates:
            break
        _p, _e, rank, p_steps, p_last = min(candidates)
        r = by_rank[rank]
        slow.append(
            {
                "rank": rank,
                "node": r["node"],
                "excess_ratio": excess[rank],
                "slowest_steps": slow_steps.get(rank, 0),
                "steps": len(table),
                "p_value_steps": p_steps,
                "last_arrivals": last.get(rank, 0),
                "collectives": n_coll,
                "p_value_arrivals": p_last,
                "compute_per_iteration_ms": r.get("compute_per_iteration_ms"),
                "median_compute_per_iteration_ms": compute_median,
                "comm_wait_per_iteration_ms": r.get("comm_wait_per_iteration_ms"),
                "median_comm_wait_per_iteration_ms": wait_median,
            }
        )
        remaining.discard(rank)
    if slow:
        test["verdict"] = f"{len(slow)} straggler(s) at {alpha:.0%} significance"
    elif need is not None and len(table) < need and n_coll < need:
        test["verdict"] = (
            f"none stands out; {len(table)} profiled steps cannot show one at {alpha:.0%} "
            f"significance with {count} ranks (profile at least {need} steps)"
        )
    else:
        test["verdict"] = "none stands out"
    slow_ranks = {s["rank"] for s in slow}
    by_node: dict = {}
    for r in ranks:
        if r["rank"] in steps:
            by_node.setdefault(r["node"], []).append(r["rank"])
    slow_nodes = []
    if len(by_node) > 1:
        for node, members in sorted(by_node.items()):
            if all(m in slow_ranks for m in members):
                slow_nodes.append(
                    {
                        "node": node,
                        "ranks": sorted(members),
                        "excess_ratio": statistics.median(s["excess_ratio"] for s in slow if s["rank"] in members),
                    }
                )
    return slow, slow_nodes, test


def _threshold_limit(name, raw):
    """A threshold as a number; text (an AWX survey answer, ``k=v`` words) is converted, and an empty
    answer means the check is not wanted."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    value = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str):
        with contextlib.suppress(ValueError):
            value = float(raw)
    if value is None:
        raise ReportError(f"aorta_expected_results: {name}: {raw!r} is not a number")
    low, high, low_ok = THRESHOLD_RANGES.get(name, (-math.inf, math.inf, True))
    if not math.isfinite(value) or value > high or value < low or (value == low and not low_ok):
        where = f"from {low:g}" if low_ok else f"above {low:g}"
        upto = f" to {high:g}" if math.isfinite(high) else ""
        raise ReportError(f"aorta_expected_results: {name}: {raw!r} must be a number {where}{upto}")
    return value


def threshold_problems(expected) -> list:
    """Each bad threshold of ``expected`` as one line naming it (for checks before the launch)."""
    if expected in (None, ""):
        return []
    if isinstance(expected, str):  # an AWX survey answer: JSON or k=v words, as the task reads it
        try:
            expected = check_type_dict(expected)
        except (TypeError, ValueError) as exc:
            return [f"aorta_expected_results: {expected!r} is not a mapping ({exc})"]
    if not isinstance(expected, dict):
        return ["aorta_expected_results: must be a mapping of threshold names to numbers"]
    problems = []
    unknown = sorted(set(expected) - set(THRESHOLDS))
    if unknown:
        problems.append(
            f"aorta_expected_results: unknown threshold {', '.join(unknown)}; known: {', '.join(THRESHOLDS)}"
        )
    for name in THRESHOLDS:
        try:
            _threshold_limit(name, expected.get(name))
        except ReportError as exc:
            problems.append(str(exc))
    return problems


def check_thresholds(performance: dict, expected: dict) -> list:
    """CVS's expected_results, each with pass/fail and the reason."""
    unknown = sorted(set(expected) - set(THRESHOLDS))
    if unknown:
        raise ReportError(
            f"aorta_expected_results: unknown threshold {', '.join(unknown)}; known: {', '.join(THRESHOLDS)}"
        )
    checks = []
    avg_ms = performance.get("avg_iteration_time_ms")
    values = {
        "max_avg_iteration_ms": avg_ms,
        "min_compute_ratio": performance.get("avg_compute_ratio"),
        "min_overlap_ratio": performance.get("avg_overlap_ratio"),
        "max_time_variance_ratio": (performance["std_iteration_time_us"] / (avg_ms * 1000.0))
        if avg_ms and performance.get("std_iteration_time_us") is not None
        else None,
    }
    for name in THRESHOLDS:
        limit = _threshold_limit(name, expected.get(name))
        if limit is None:
            continue
        value = values[name]
        if value is None:
            checks.append(
                {
                    "name": name,
                    "threshold": limit,
                    "value": None,
                    "passed": False,
                    "reason": f"{name}: no value could be measured",
                }
            )
            continue
        passed = value <= limit if name.startswith("max_") else value >= limit
        relation = ("exceeds" if name.startswith("max_") else "is below") if not passed else "within"
        checks.append(
            {
                "name": name,
                "threshold": limit,
                "value": value,
                "passed": passed,
                "reason": f"{name}: measured {value:.6g} {relation} threshold {limit}",
            }
        )
    return checks


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
) -> dict:
    """The whole report for a directory of traces (a combined_traces tree or any folder)."""
    if summaries is None and not os.path.isdir(traces_dir):
        raise ReportError(f"aorta_traces_dir: {traces_dir} is not a directory")
    names = _node_names(traces_dir) if os.path.isdir(traces_dir) else {}
    if summaries is None:
        summaries = analyse_all(find_traces(traces_dir), include_unlinked_kernels, max_workers)
    errors = [{"file": s["file"], "error": s["error"]} for s in summaries if "error" in s]
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
    world = expected_ranks or max([s.get("world_size") or 0 for s in summaries if "error" not in s] + [len(ranks)])
    missing = [r for r in range(world) if r not in seen]
    nodes = sorted({r["node"] for r in ranks})
    iteration_means = [r["iteration_time_ms"] for r in ranks if r["iteration_time_ms"] is not None]
    windows_ms = [r["total_time_us"] / 1000.0 for r in ranks if r.get("total_time_us") is not None]
    performance = {
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
        "stragglers": slow,
        "straggler_test": straggler_test,
        "_timeline": timeline,
        "slow_nodes": slow_nodes,
        "missing_ranks": missing,
        "duplicate_rank_files": duplicates,
        "errors": errors,
        "counting": "include_unlinked_kernels" if include_unlinked_kernels else "linked_kernels (TraceLens default)",
    }


def _rank_row(s: dict, node: str, traces_dir: str) -> dict:
    return {
        "rank": s["rank"],
        "node": node,
        "file": s["file"] if s.get("node") else os.path.relpath(s["file"], traces_dir),
        "gpu": s["gpu"],
        "total_time_us": s["total_time_ms"] * 1000.0,
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


CSV_COLUMNS = (
    "rank",
    "node",
    "file",
    "iteration_time_ms",
    "compute_ratio",
    "comm_ratio",
    "overlap_ratio",
    "compute_per_iteration_ms",
    "comm_wait_per_iteration_ms",
    "total_time_us",
)


def write_outputs(report: dict, out_dir: str) -> dict:
    """aorta_benchmark_report.json, per_rank.csv and report.html (with PNG plots when matplotlib is here)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "report": os.path.join(out_dir, "aorta_benchmark_report.json"),
        "csv": os.path.join(out_dir, "per_rank.csv"),
        "html": os.path.join(out_dir, "report.html"),
    }
    timeline = report.get("_timeline")
    report = {k: v for k, v in report.items() if k != "_timeline"}
    if timeline is not None:
        paths["timeline"] = os.path.join(out_dir, "timeline.json")
        _atomic_write(paths["timeline"], json.dumps(timeline, separators=(",", ":")) + "\n")
    _atomic_write(paths["report"], json.dumps(report, indent=2, sort_keys=False) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CSV_COLUMNS, *(f"gpu_{row}_ms" for row in TIMELINE_ROWS)])
    for r in report["per_rank_summary"]:
        writer.writerow([r[c] for c in CSV_COLUMNS] + [r["gpu_timeline"][row] for row in TIMELINE_ROWS])
    _atomic_write(paths["csv"], buffer.getvalue())
    _atomic_write(paths["html"], render_html(report))
    return paths


def _atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _plots(report: dict) -> list:
    try:
        import matplotlib  # noqa: PLC0415 - optional, controller only

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt  # noqa: PLC0415
    except ImportError:
        return []
    ranks = report["per_rank_summary"]
    if not ranks:
        return []
    slow = {s["rank"] for s in report["stragglers"]}
    labels = [str(r["rank"]) for r in ranks]
    figures = []

    fig, ax = plt.subplots(figsize=(max(6, len(ranks) * 0.5), 3.6))
    compute = [r["compute_per_iteration_ms"] or 0 for r in ranks]
    wait = [r["comm_wait_per_iteration_ms"] or 0 for r in ranks]
    iteration = [r["iteration_time_ms"] or 0 for r in ranks]
    other = [max(i - c - w, 0) for i, c, w in zip(iteration, compute, wait)]
    ax.bar(labels, compute, label="compute", color="#3b7dd8")
    ax.bar(labels, wait, bottom=compute, label="exposed communication", color="#e8a33d")
    ax.bar(labels, other, bottom=[c + w for c, w in zip(compute, wait)], label="other / idle", color="#c8c8c8")
    ax.set_xlabel("global rank")
    ax.set_ylabel("ms per iteration")
    ax.set_title("Per-rank time breakdown (per iteration)")
    ax.legend(fontsize=8)
    figures.append(("Per-rank time breakdown", fig))

    fig, ax = plt.subplots(figsize=(max(6, len(ranks) * 0.5), 3.6))
    colors = ["#d62728" if r["rank"] in slow else "#3b7dd8" for r in ranks]
    ax.bar(labels, iteration, color=colors)
    ax.set_xlabel("global rank (red: suspected straggler)")
    ax.set_ylabel("mean iteration time (ms)")
    ax.set_title("Iteration time per rank")
    figures.append(("Iteration time per rank, stragglers marked", fig))

    nodes = sorted({r["node"] for r in ranks})
    fig, ax = plt.subplots(figsize=(max(6, len(nodes) * 1.2), 3.6))
    node_compute = [
        statistics.fmean([r["compute_per_iteration_ms"] or 0 for r in ranks if r["node"] == n]) for n in nodes
    ]
    node_wait = [
        statistics.fmean([r["comm_wait_per_iteration_ms"] or 0 for r in ranks if r["node"] == n]) for n in nodes
    ]
    positions = range(len(nodes))
    ax.bar([p - 0.2 for p in positions], node_compute, width=0.4, label="compute", color="#3b7dd8")
    ax.bar([p + 0.2 for p in positions], node_wait, width=0.4, label="exposed communication", color="#e8a33d")
    ax.set_xticks(list(positions))
    ax.set_xticklabels(nodes, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ms per iteration (mean of the node's ranks)")
    ax.set_title("Per-node view")
    ax.legend(fontsize=8)
    figures.append(("Per-node view", fig))

    images = []
    for title, fig in figures:
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        images.append((title, base64.b64encode(buffer.getvalue()).decode()))
    return images


def _esc(value) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _fmt(value, digits=3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _esc(value)


HEADLINE = (
    "avg_step_time_ms",
    "avg_iteration_time_ms",
    "std_iteration_time_us",
    "avg_compute_ratio",
    "avg_comm_ratio",
    "avg_overlap_ratio",
)


def _why_html(diagnosis) -> str:
    """ "Why it stopped": the ranks behind with their frames, what the others wait in, kernel trouble."""
    if not diagnosis:
        return ""
    behind = diagnosis.get("behind") or []
    errors = diagnosis.get("node_errors") or []
    if not behind and not errors and diagnosis.get("kind") == "none":
        return ""
    parts = ["<h2>Why it stopped</h2>", f"<p class='bad'>{_esc(diagnosis.get('summary', ''))}</p>"]
    if behind:
        parts.append(
            "<table><tr><th>rank</th><th>node</th><th>frame</th><th>in</th><th>last collective</th>"
            "<th>exception</th></tr>"
        )
        for row in behind:
            last = f"{row['last_op']} #{row['seq']}" if row.get("last_op") else ""
            exc = f"{row['exception']}: {row.get('message') or ''}" if row.get("exception") else ""
            cells = (row.get("rank"), row.get("node"), row.get("frame"), row.get("stuck_in"), last, exc)
            parts.append("<tr>" + "".join(f"<td>{_esc(c if c is not None else '')}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    if diagnosis.get("waiting"):
        parts.append(f"<p>Waiting: {_esc(diagnosis['waiting'])} (found by {_esc(diagnosis.get('method', ''))})</p>")
    if errors:
        parts.append("<h3>Kernel log</h3><table><tr><th>node</th><th>at</th><th>kind</th><th>line</th></tr>")
        for row in errors:
            line = (row.get("node"), row.get("at"), row.get("kind"), row.get("line"))
            parts.append("<tr>" + "".join(f"<td>{_esc(c if c is not None else '')}</td>" for c in line) + "</tr>")
        parts.append("</table>")
    if diagnosis.get("evidence"):
        parts.append("<p>Evidence: " + ", ".join(_esc(p) for p in diagnosis["evidence"]) + "</p>")
    return "".join(parts)


def _change(delta) -> str:
    return "" if delta is None else f"{delta * 100:+.1f}%"


def _baseline_html(baseline) -> str:
    if not baseline:
        return ""
    css = "bad" if baseline["verdict"] == "regression" else "ok"
    rows = "".join(
        f"<tr><td>{_esc(name)}</td><td>{_fmt(m['now'])}</td><td>{_fmt(m['then'])}</td>"
        f"<td>{_change(m['delta_ratio'])}</td></tr>"
        for name, m in baseline["metrics"].items()
    )
    return (
        f"<h2>Against the baseline</h2><p class='{css}'>{_esc(baseline['verdict'])} (tolerance "
        f"{baseline['tolerance'] * 100:.0f}%) against {_esc(baseline['source'])}"
        f"{(': ' + _esc(baseline['reason'])) if baseline.get('reason') else ''}</p>"
        f"<table><tr><th>figure</th><th>now</th><th>then</th><th>change</th></tr>{rows}</table>"
    )


def render_html(report: dict) -> str:
    perf = report["performance"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Aorta benchmark report</title><style>"
        "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}"
        ".bad{color:#b00020;font-weight:bold}.ok{color:#1b7f3b}img{max-width:100%}</style></head><body>",
        f"<h1>Aorta benchmark report</h1><p>Status: <b>{_esc(report['status'])}</b> &middot; "
        f"{report['cluster']['nodes']} nodes &middot; {len(report['per_rank_summary'])} ranks analysed &middot; "
        f"counting: {_esc(report['counting'])}</p>",
        _why_html(report.get("diagnosis")),
        _baseline_html(report.get("baseline")),
        "".join(f"<p class='bad'>{_esc(note)}</p>" for note in (report.get("tools") or {}).get("notes", [])),
        "<h2>Headline</h2><table><tr><th>avg step (ms)</th><th>avg profiled window, CVS iteration (ms)</th>"
        "<th>std window across ranks (us)</th><th>compute ratio</th>"
        "<th>comm ratio</th><th>overlap ratio</th></tr><tr>"
        + "".join(f"<td>{_fmt(perf[k])}</td>" for k in HEADLINE)
        + "</tr></table>",
    ]
    if report["validation"]["checks"]:
        parts.append("<h2>Thresholds</h2><ul>")
        for check in report["validation"]["checks"]:
            css = "ok" if check["passed"] else "bad"
            parts.append(f"<li class='{css}'>{'PASS' if check['passed'] else 'FAIL'}: {_esc(check['reason'])}</li>")
        parts.append("</ul>")
    parts.append("<h2>Stragglers</h2>")
    test = report.get("straggler_test") or {}
    if report["stragglers"]:
        parts.append(
            "<table><tr><th>rank</th><th>node</th><th>excess compute</th><th>slowest in steps</th>"
            "<th>arrived last</th><th>compute/iter (ms)</th><th>comm wait/iter (ms)</th></tr>"
        )
        for s in report["stragglers"]:
            parts.append(
                f"<tr><td>{s['rank']}</td><td>{_esc(s['node'])}</td><td>{s['excess_ratio'] * 100:.0f}%</td>"
                f"<td>{s['slowest_steps']}/{s['steps']} (p={s['p_value_steps']:.3g})</td>"
                f"<td>{s['last_arrivals']}/{s['collectives']} (p={s['p_value_arrivals']:.3g})</td>"
                f"<td>{_fmt(s['compute_per_iteration_ms'])}</td><td>{_fmt(s['comm_wait_per_iteration_ms'])}</td></tr>"
            )
        parts.append("</table>")
        for node in report["slow_nodes"]:
            parts.append(f"<p class='bad'>Node {_esc(node['node'])} is slow as a whole (ranks {node['ranks']}).</p>")
    else:
        parts.append(f"<p class='ok'>{_esc(test.get('verdict', 'No rank stands out.'))}</p>")
    if test:
        parts.append(
            f"<p>Test: a rank is named when being alone the slowest that often, in the profiled steps or at"
            f" the collectives, has under {test.get('alpha', STRAGGLER_ALPHA):.0%} chance from noise across"
            f" {test.get('ranks')} ranks (binomial, Bonferroni), and its compute exceeds the median by more than"
            f" {test.get('threshold', 0) * 100:.0f}%; {test.get('steps')} steps,"
            f" {test.get('collectives')} collectives.</p>"
        )
    if report["missing_ranks"]:
        parts.append(f"<p class='bad'>Missing ranks: {report['missing_ranks']}</p>")
    for error in report["errors"]:
        parts.append(f"<p class='bad'>{_esc(error['error'])}</p>")
    for title, image in _plots(report):
        parts.append(f"<h2>{_esc(title)}</h2><img alt='{_esc(title)}' src='data:image/png;base64,{image}'>")
    parts.append("<h2>Per rank</h2><table><tr>" + "".join(f"<th>{c}</th>" for c in CSV_COLUMNS) + "</tr>")
    for r in report["per_rank_summary"]:
        parts.append("<tr>" + "".join(f"<td>{_fmt(r[c])}</td>" for c in CSV_COLUMNS) + "</tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)


# The task's options, shared by the trace_parse module and its action plugin (which runs the same
# work in the controller's own Python, whatever the hosts' ansible_python_interpreter).
TASK_ARGUMENT_SPEC = {
    "traces_dir": {"type": "path", "required": True},
    "summaries": {"type": "list", "elements": "dict"},
    "report_dir": {"type": "path", "required": True},
    "include_unlinked_kernels": {"type": "bool", "default": False},
    "expected_results": {"type": "dict", "default": {}},
    "fail_on_threshold": {"type": "bool", "default": False},
    "gpus_per_node": {"type": "int"},
    "expected_ranks": {"type": "int"},
    "configuration": {"type": "dict", "default": {}},
    "straggler_threshold": {"type": "float", "default": 0.1},
    "max_workers": {"type": "int"},
    "duration_seconds": {"type": "float"},
    "diagnosis": {"type": "dict"},
    "baseline": {"type": "path"},
    "baseline_tolerance": {"type": "float", "default": 0.05},
    "clock_offsets": {"type": "dict", "default": {}},
}


def run_task(p: dict, check_mode: bool = False) -> tuple:
    """The trace_parse task: (result, failure message or '')."""
    expected = {k: v for k, v in (p["expected_results"] or {}).items() if v is not None}
    try:
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
        )
    except ReportError as exc:
        return {"changed": False}, str(exc)
    if p.get("diagnosis"):
        report["diagnosis"] = p["diagnosis"]
    if p.get("baseline"):
        try:
            report["baseline"] = compare_baseline(report, p["baseline"], p.get("baseline_tolerance", 0.05))
        except ReportError as exc:
            return {"changed": False}, str(exc)
    report["tools"] = tool_notes()
    result = {
        "changed": not check_mode,
        "status": report["status"],
        "performance": report["performance"],
        "stragglers": report["stragglers"],
        "slow_nodes": report["slow_nodes"],
        "validation": report["validation"],
        "missing_ranks": report["missing_ranks"],
        "errors": report["errors"],
        "tools": report["tools"],
        "baseline": report.get("baseline"),
    }
    if not check_mode:
        try:
            result.update(write_outputs(report, p["report_dir"]))
        except OSError as exc:
            return result, f"cannot write the report into {p['report_dir']}: {exc.strerror}"
    if p["fail_on_threshold"] and not report["validation"]["passed"]:
        failed = [c["reason"] for c in report["validation"]["checks"] if not c["passed"]]
        return result, "thresholds not met: " + "; ".join(failed)
    return result, ""


def tool_notes() -> dict:
    """What this Python has for the report: plots (matplotlib) and the fast decoder (msgspec)."""
    try:
        import matplotlib  # noqa: F401, PLC0415 - optional, controller only

        plots = True
    except ImportError:
        plots = False
    fast = _analysis.msgspec is not None
    notes = []
    if not plots:
        notes.append("no plots: matplotlib is not installed in the controller's Python (pip install matplotlib)")
    if not fast:
        notes.append("slow decoding: msgspec is not installed in the controller's Python (pip install msgspec)")
    return {"python": sys.executable, "plots": plots, "fast_decoder": fast, "notes": notes}


# The headline figures shown against a baseline; only the iteration time is judged (the ratios
# of a few profiled steps move with the machine's load and have no spread to judge them by).
BASELINE_METRICS = ("avg_step_time_ms", "avg_iteration_time_ms", "avg_compute_ratio", "avg_overlap_ratio")


def _step_noise_ms(report: dict) -> float | None:
    """Standard error of the mean iteration time, from the ranks' step-to-step spread."""
    spreads = [
        (r["iterations"]["std"], r["iterations"]["count"])
        for r in report.get("per_rank_summary") or []
        if (r.get("iterations") or {}).get("count", 0) > 1 and r["iterations"].get("std") is not None
    ]
    if not spreads:
        return None
    std = statistics.fmean(sd for sd, _n in spreads)
    count = min(n for _sd, n in spreads)
    return std / math.sqrt(count)


def compare_baseline(report: dict, source: str, tolerance: float = 0.05) -> dict:
    """``baseline``: the headline figures now and then with their relative change, and the verdict
    on the step time (``avg_step_time_ms``): ``regression`` when it is longer by more than ``tolerance`` and by more
    than twice the noise of the two means (their steps' spread), ``improvement`` the other way,
    ``within noise`` when beyond the tolerance but not the noise, else ``same``. ``source`` is an
    earlier results directory or its report."""
    if not 0 <= float(tolerance) < 1:
        raise ReportError(f"aorta_baseline_tolerance: {tolerance!r} must be from 0 to below 1")
    path = os.path.join(source, "aorta_benchmark_report.json") if os.path.isdir(source) else source
    try:
        with open(path) as handle:
            earlier = json.load(handle)
        then = earlier["performance"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"aorta_baseline: {source}: not a report this collection wrote ({exc})") from None
    now = report["performance"]
    metrics = {}
    for name in BASELINE_METRICS:
        a, b = now.get(name), then.get(name)
        delta = None if a is None or b is None or not b else (a - b) / abs(b)
        metrics[name] = {"now": a, "then": b, "delta_ratio": delta, "judged": name == "avg_step_time_ms"}
    a, b = now.get("avg_step_time_ms"), then.get("avg_step_time_ms")
    noise_now, noise_then = _step_noise_ms(report), _step_noise_ms(earlier)
    noise = 2 * math.sqrt(noise_now**2 + noise_then**2) if noise_now is not None and noise_then is not None else None
    verdict, reason = "same", ""
    if a is None or b is None or not b:
        verdict, reason = "not compared", "no step time in one of the reports (an earlier version's report?)"
    else:
        delta = (a - b) / b
        beyond_noise = noise is not None and abs(a - b) > noise
        if abs(delta) > tolerance and beyond_noise:
            verdict = "regression" if delta > 0 else "improvement"
        elif abs(delta) > tolerance:
            verdict = "within noise"
            reason = (
                f"a change of {delta * 100:+.1f}% is within the steps' noise (2 sigma = {noise:.3g} ms)"
                if noise is not None
                else "too few profiled steps to tell a change from noise"
            )
    return {
        "source": path,
        "tolerance": tolerance,
        "noise_ms": noise,
        "metrics": metrics,
        "verdict": verdict,
        "reason": reason,
    }
