# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's model: everything the page shows as plain text, numbers and SVG geometry, in page
order (``page_model``); the opening rows come from _opening, the advice from _next_steps.

Private to this collection; controller side.
"""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import (
    STRAGGLER_ALPHA,
    times,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._html import render
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._next_steps import what_next
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._opening import (
    HEADLINE,
    PERFETTO,
    files_beside,
    fmt,
    opening_rows,
    percent_change,
    ranges,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._views import rank_bars, views

# per_rank.csv's columns, each (its name, the per-rank row's key it holds). One word, one meaning:


PAGE_RANKS = 256  # above this the page keeps the ranks that compute longest; per_rank.csv has all


def _table(head, rows, left=False, css="") -> dict:
    """A table for the template: headings, rows of cells (plain text), and a class for every row."""
    return {"head": list(head), "rows": list(rows), "left": left, "css": css}


def _why(diagnosis):
    """ "Why it stopped": the ranks behind with their frames, what the others wait in, kernel trouble."""
    if not diagnosis:
        return None
    behind = diagnosis.get("behind") or []
    errors = diagnosis.get("node_errors") or []
    if not behind and not errors and diagnosis.get("kind") == "none":
        return None

    def text(value):
        return "" if value is None else str(value)

    behind_rows = []
    for row in behind:
        last = f"{row['last_op']} #{row['seq']}" if row.get("last_op") else ""
        exc = f"{row['exception']}: {row.get('message') or ''}" if row.get("exception") else ""
        behind_rows.append(
            [text(c) for c in (row.get("rank"), row.get("node"), row.get("frame"), row.get("stuck_in"), last, exc)]
        )
    return {
        "summary": diagnosis.get("summary", ""),
        "behind": _table(("rank", "node", "frame", "in", "last collective", "exception"), behind_rows),
        "waiting": diagnosis.get("waiting"),
        "method": diagnosis.get("method", ""),
        "errors": _table(
            ("node", "at", "kind", "line"),
            [[text(row.get(k)) for k in ("node", "at", "kind", "line")] for row in errors],
        ),
        "evidence": [str(p) for p in diagnosis.get("evidence") or []],
    }


def _baseline(baseline):
    if not baseline:
        return None
    reason = f": {baseline['reason']}" if baseline.get("reason") else ""
    chosen = f" ({baseline['chosen']})" if baseline.get("chosen") else ""
    differs = baseline.get("differences") or []
    differs_text = f"; differs: {'; '.join(differs)}" if differs else ""
    against = f" against {baseline['source']}" if baseline.get("source") else ""
    who = f"; {baseline['stands_out']}" if baseline.get("stands_out") else ""
    return {
        "css": "bad" if baseline["verdict"] == "regression" else "ok",
        "line": f"{baseline['verdict']} (tolerance {baseline['tolerance'] * 100:.0f}%){against}{chosen}{reason}"
        f"{differs_text}{who}",
        "table": _table(
            ("figure", "now", "then", "change"),
            [
                [name, fmt(m["now"]), fmt(m["then"]), percent_change(m["delta_ratio"])]
                for name, m in baseline["metrics"].items()
            ],
        ),
    }


def _size(size_bytes) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


def _straggler_tables(report: dict) -> dict:
    test = report.get("straggler_test") or {}
    node_test = test.get("node_test") or {}
    stragglers = _table(
        (
            "rank",
            "node",
            "excess compute",
            "slowest in steps",
            "arrived last",
            "compute per step (ms)",
            "exposed comm per step (ms)",
        ),
        [
            [
                str(s["rank"]),
                s["node"],
                f"{s['excess_ratio'] * 100:.0f}%",
                f"{s['slowest_steps']}/{s['steps']} (p={s['p_value_steps']:.3g})",
                f"{s['last_arrivals']}/{s['collectives']} (p={s['p_value_arrivals']:.3g})",
                fmt(s["compute_per_iteration_ms"]),
                fmt(s["comm_wait_per_iteration_ms"]),
            ]
            for s in report["stragglers"]
        ],
    )
    # A throttled node slows all its ranks together, so none of them is alone the slowest rank.
    node_rows = []
    for node in report["slow_nodes"]:
        steps = ", ".join(
            f"{s['node_compute_ms']:.1f}/{s['median_node_compute_ms']:.1f}" for s in node.get("per_step", [])[:8]
        )
        node_rows.append(
            [
                node["node"],
                ranges(node["ranks"]),
                f"{node['excess_ratio'] * 100:.0f}%",
                f"{node.get('slowest_steps', 0)}/{node.get('steps', 0)} (p={node.get('p_value_steps', 1):.3g})",
                f"{node.get('last_arrivals', 0)}/{node.get('collectives', 0)} "
                f"(p={node.get('p_value_arrivals', 1):.3g})",
                steps,
            ]
        )
    slow_nodes = _table(
        (
            "slow node",
            "ranks",
            "excess compute",
            "slowest node in steps",
            "arrived last",
            "its compute vs the median node, per step (ms)",
        ),
        node_rows,
        css="bad",  # every slow node is a finding
    )
    test_line = ""
    if test:
        test_line = (
            f"Test: a rank is named when being alone the slowest that often, in the profiled steps or at"
            f" the collectives, has under {test.get('alpha', STRAGGLER_ALPHA):.0%} chance from noise across"
            f" {test.get('ranks')} ranks (binomial, Bonferroni), and its compute exceeds the median by more than"
            f" {test.get('threshold', 0) * 100:.0f}%; {test.get('steps')} steps,"
            f" {test.get('collectives')} collectives. A node is named the same way among the"
            f" {node_test.get('nodes', 0)} nodes, from the median of its ranks: slow as a whole, it has no rank"
            " slower than its own node's others."
        )
    return {
        "stragglers": stragglers,
        "rank_verdict": test.get("verdict", "No rank stands out."),
        "slow_nodes": slow_nodes,
        "node_verdict": node_test.get("verdict"),
        "test_line": test_line,
    }


def _fabric_median(report: dict) -> float | None:
    """The fabric sweep's median rate (Gbit/s) when it ran and measured one, else None."""
    sweep = report.get("fabric_sweep")
    median = sweep.get("median_gbps") if isinstance(sweep, dict) and sweep.get("ran") else None
    return median if isinstance(median, (int, float)) and median > 0 else None


def _of_fabric(busbw_gbps, fabric) -> str:
    """A collective's busbw (GB/s, x8 to Gbit/s) against the sweep's median, blank without either."""
    return times(busbw_gbps * 8.0 / fabric) if busbw_gbps is not None and fabric else ""


def _analysis(report: dict) -> dict:
    """Top kernels, kernel time by category and the collectives with nccl-tests' bandwidths."""
    fabric = _fabric_median(report)
    kernels = [
        [
            k["name"][:160],
            str(k["count"]),
            fmt(k["total_ms"]),
            fmt(k["mean_us"]),
            "" if k["share"] is None else f"{k['share'] * 100:.1f}%",
        ]
        for k in report.get("top_kernels") or []
    ]
    collectives = [
        [
            c["op"],
            _size(c["size_bytes"]),
            fmt(c["group_size"]),
            str(c["count"]),
            fmt(c["time_ms"]),
            fmt(c["mean_ms"]),
            fmt(c["algbw_gbps"]),
            fmt(c["busbw_gbps"]),
            _of_fabric(c["busbw_gbps"], fabric),
        ]
        for c in (report.get("collective_table") or [])[:50]
    ]
    return {
        "top_kernels": _table(("kernel", "count", "total (ms)", "mean (us)", "share of GPU time"), kernels, left=True),
        "categories": report.get("kernel_time_by_category_ms") or {},
        "collectives": _table(
            ("op", "size", "ranks", "calls", "time (ms)", "mean (ms)", "algbw (GB/s)", "busbw (GB/s)", "of fabric"),
            collectives,
        ),
        "fabric_note": f"of fabric = busbw × 8 (Gbit/s) / the fabric sweep's median, {fabric:.3g} Gbit/s"
        if fabric
        else "",
    }


def _per_rank(report: dict) -> dict:
    """The per-rank table: per_rank.csv's columns, the ranks that compute longest above PAGE_RANKS."""
    ranks = report["per_rank_summary"]
    shown: list = ranks
    note = ""
    if len(ranks) > PAGE_RANKS:
        # At thousands of ranks a table is not read: the ranks that compute longest, the rest in the CSV.
        shown = sorted(ranks, key=lambda r: -(r.get("compute_per_iteration_ms") or 0.0))[:PAGE_RANKS]
        note = f"The {PAGE_RANKS} of {len(ranks)} ranks that compute longest per step; every rank is in per_rank.csv."
    rows = [
        [fmt(cell(r, key)) if key != "rank" or r.get("rank") is not None else "(no rank)" for _name, key in CSV_FIELDS]
        for r in [*shown, *(report.get("unranked_traces") or [])]
    ]
    return {"per_rank": _table(CSV_COLUMNS, rows), "per_rank_note": note}


# per_rank.csv's columns, each (its name, the per-rank row's key it holds). One word, one meaning:


# The row keys compute_per_iteration_ms and comm_wait_per_iteration_ms are per step too (the JSON's
# older names, kept for its readers); the CSV says step.
CSV_FIELDS = (
    ("rank", "rank"),
    ("node", "node"),
    ("file", "file"),
    ("step_time_ms", "step_time_ms"),
    ("compute_ratio", "compute_ratio"),
    ("comm_ratio", "comm_ratio"),
    ("overlap_ratio", "overlap_ratio"),
    ("compute_per_step_ms", "compute_per_iteration_ms"),
    ("comm_wait_per_step_ms", "comm_wait_per_iteration_ms"),
    ("total_time_us", "total_time_us"),
)
CSV_COLUMNS = tuple(name for name, _key in CSV_FIELDS)


def cell(row: dict, key: str):
    """A per-rank row's value for a CSV column; step_time_ms from iteration_time_ms, its older name,
    in a row made before the rename."""
    if key == "step_time_ms" and key not in row:
        return row.get("iteration_time_ms")
    return row.get(key)


def page_model(report: dict, out_dir: str | None = None) -> dict:
    """Everything report.html shows, as plain text, numbers and SVG geometry, in page order;
    ``out_dir``, where the page is written, gives its links to the files beside it."""
    perf = report["performance"]
    checks = [
        {
            "css": "ok" if c["passed"] else "bad",
            "verdict": "SKIP" if c.get("skipped") else "PASS" if c["passed"] else "FAIL",
            "reason": c["reason"],
        }
        for c in report["validation"]["checks"]
    ]
    skipped = report.get("skipped_files") or []
    skipped_text = ", ".join(s["file"] for s in skipped[:5]) + (
        f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    )
    test = report.get("straggler_test") or {}
    opening = opening_rows(report)
    said = {row["text"] for row in opening}
    model = {
        "opening": opening,
        "files": files_beside(report, out_dir),
        "perfetto": PERFETTO,
        "what_next": what_next(report, out_dir),
        "warnings": [w for w in report.get("warnings") or [] if w not in said],  # said at the top
        "no_trace": report.get("no_trace"),
        "why": _why(report.get("diagnosis")),
        "baseline": _baseline(report.get("baseline")),
        "tool_notes": list((report.get("tools") or {}).get("notes", [])),
        "headline": _table(
            [title for _key, title, _scale, _means in HEADLINE],
            [[fmt(perf[k] * scale if perf[k] is not None else None) for k, _t, scale, _m in HEADLINE]],
        ),
        "headline_notes": [(title, means) for _key, title, _scale, means in HEADLINE],
        "checks": checks,
        "missing": ranges(report["missing_ranks"]) if report["missing_ranks"] else "",
        "errors": [e["error"] for e in report["errors"] if e["error"] != report.get("no_trace")],  # said at the top
        "paired": len(report.get("paired_files") or []),
        "skipped": skipped_text,
        "views": views(report, test.get("threshold") or 0.1),
        "bars": rank_bars(report["per_rank_summary"], {s["rank"] for s in report["stragglers"]}),
    }
    model.update(_straggler_tables(report))
    model.update(_analysis(report))
    model.update(_per_rank(report))
    return model


def render_html(report: dict, out_dir: str | None = None) -> str:
    """report.html; with ``out_dir`` (where it is written) it links the files beside it."""
    return render("report.html", page_model(report, out_dir))
