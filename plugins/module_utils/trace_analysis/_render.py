# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's files: aorta_benchmark_report.json, timeline.json, per_rank.csv and report.html.

Private to this collection; controller side (the node-side summary never ships it). report.html
is _report_template rendered by Jinja2 with autoescape (Jinja2 ships with ansible-core) from
page_model: plain text and numbers, every figure formatted here, so the template only lays out.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time

try:
    import jinja2
except ImportError:  # pragma: no cover - ansible-core requires Jinja2; module_utils guard their imports
    jinja2 = None  # type: ignore[assignment]

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import TIMELINE_ROWS
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._report_template import PAGE, VIEWS
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import STRAGGLER_ALPHA
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._views import rank_bars, views

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

PAGE_RANKS = 256  # above this the page keeps the ranks that compute longest; per_rank.csv has all


def write_outputs(report: dict, out_dir: str) -> dict:
    """aorta_benchmark_report.json, timeline.json, per_rank.csv and report.html."""
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
    # A trace without rank information (a single process of several) is a row too, rank empty.
    for r in [*report["per_rank_summary"], *(report.get("unranked_traces") or [])]:
        writer.writerow([r.get(c) for c in CSV_COLUMNS] + [r["gpu_timeline"][row] for row in TIMELINE_ROWS])
    _atomic_write(paths["csv"], buffer.getvalue())
    _atomic_write(paths["html"], render_html(report))
    return paths


def _atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _ranges(ranks) -> str:
    """Ranks as ranges: [0, 1, 2, 5] -> '0-2, 5'."""
    out: list = []
    run: list = []
    for rank in sorted(ranks):
        if run and rank == run[-1] + 1:
            run.append(rank)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [rank]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _fmt(value, digits=3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


# The headline table: (key, heading, scale into the unit the heading names, what it means).
HEADLINE = (
    ("avg_step_time_ms", "avg step (ms)", 1.0, "the mean ProfilerStep#N length (CPU side), averaged over ranks"),
    (
        "avg_iteration_time_ms",
        "avg profiled window, CVS iteration (ms)",
        1.0,
        "each rank's GPU span, first to last GPU event of its trace (TraceLens total_time), averaged over "
        "ranks: CVS's 'iteration'. It covers the profiled steps' GPU work, so it can be shorter than a step "
        "when the GPU idles at the start or end of a step",
    ),
    ("std_iteration_time_us", "spread of the window across ranks (ms)", 0.001, "its standard deviation over ranks"),
    ("avg_compute_ratio", "compute ratio", 1.0, "computation time / the window"),
    ("avg_comm_ratio", "comm ratio", 1.0, "communication time / the window"),
    ("avg_overlap_ratio", "overlap ratio", 1.0, "communication hidden under computation / communication"),
)


def _epoch(value) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))


def _rate(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _row(key: str, title: str, text: str, css: str = "", strong: str = "") -> dict:
    return {"id": key, "title": title, "text": text, "css": css, "strong": strong}


def opening_rows(report: dict) -> list:
    """What a performance engineer reads first, in this order and before any chart; each row has a
    stable id (docs/results.md lists them)."""
    run = report.get("run") or {}
    perf = report["performance"]
    rows = []
    found = report.get("verdict")
    if found:
        # The one verdict first, the same words as run.json's and the console's last line.
        why = "; ".join(found["reasons"] or found["notes"])
        rows.append(_row("verdict", "verdict", why, "ok" if found["verdict"] == "PASS" else "bad", found["verdict"]))
    if run.get("record"):
        status = run.get("status") or "-"
        rows.append(
            _row("run-status", "run status", run.get("message") or "", "ok" if status == "COMPLETED" else "bad", status)
        )
        rows.append(_row("run-id", "run id", str(run.get("run_id"))))
        duration = run.get("duration_seconds")
        took = f" ({duration:.0f} s)" if isinstance(duration, (int, float)) else ""
        rows.append(
            _row(
                "run-time",
                "start, end, duration",
                f"{_epoch(run.get('started_epoch'))} → {_epoch(run.get('finished_epoch'))}{took}",
            )
        )
        image = str(run.get("image") or "-") + (f" ({run['image_id']})" if run.get("image_id") else "")
        rows.append(_row("run-image", "image", image))
        overrides = json.dumps(run.get("overrides") or {})
        rows.append(_row("run-config", "Aorta config, overrides", f"{run.get('base_config') or '-'}, {overrides}"))
    else:
        rows.append(_row("run-status", "run status", run.get("note") or "no run record", "bad"))
    if run.get("excluded"):
        named = "; ".join(f"{e['name']}: {e['reason']}" for e in run["excluded"][:10])
        more = f" and {len(run['excluded']) - 10} more (run.json)" if len(run["excluded"]) > 10 else ""
        rows.append(_row("run-excluded", f"excluded by preflight ({len(run['excluded'])})", named + more, "bad"))
    if run.get("drift"):
        rows.append(_row("run-drift", "fingerprint drift", "; ".join(run["drift"]) + " (run.json's drift)", "bad"))
    gpus = run.get("gpus_per_node") or report["cluster"]["gpus_per_node"]
    rows.append(
        _row(
            "run-size",
            "nodes × GPUs",
            f"{report['cluster']['nodes']} × {gpus} ({len(report['per_rank_summary'])} ranks analysed; "
            f"analysis {report['status']}, counting {report['counting']})",
        )
    )
    if run.get("samples_per_second"):
        tokens = run.get("tokens_per_second")
        rows.append(
            _row(
                "throughput",
                "throughput",
                f"{_rate(run['samples_per_second'])} samples/s"
                + (f" · {_rate(tokens)} tokens/s" if tokens else "")
                + f" (batch {run['batch_size']} × {run['data_parallel_ranks']} data-parallel ranks / mean step;"
                f" tokens: × sequence length {run.get('sequence_length') or '-'})",
            )
        )
    else:
        rows.append(_row("throughput", "throughput", run.get("note") or "not known: no run record"))
    step, spread = perf.get("avg_step_time_ms"), perf.get("std_step_time_us")
    spread_ms = _fmt(spread / 1000.0 if spread is not None else None)
    rows.append(_row("step-time", "step time", f"{_fmt(step)} ms ± {spread_ms} ms across ranks"))
    finding = [f"slow node {n['node']} (+{n['excess_ratio'] * 100:.0f}% compute)" for n in report["slow_nodes"]]
    finding += [
        f"straggler rank {s['rank']} on {s['node']} (+{s['excess_ratio'] * 100:.0f}%)" for s in report["stragglers"]
    ]
    test = report.get("straggler_test") or {}
    verdicts = f"ranks: {test.get('verdict', '-')}; nodes: {(test.get('node_test') or {}).get('verdict', '-')}"
    rows.append(_row("finding", "slow nodes and ranks", "; ".join(finding) or verdicts, "bad" if finding else "ok"))
    checks = report["validation"]["checks"]
    if checks:
        failed = [c for c in checks if not c["passed"]]
        passed = f"{len(checks) - len(failed)} of {len(checks)} pass" + (": " + failed[0]["reason"] if failed else "")
        rows.append(_row("thresholds-summary", "thresholds", passed, "bad" if failed else "ok"))
    return rows


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


def _change(delta) -> str:
    return "" if delta is None else f"{delta * 100:+.1f}%"


def _baseline(baseline):
    if not baseline:
        return None
    reason = f": {baseline['reason']}" if baseline.get("reason") else ""
    chosen = f" ({baseline['chosen']})" if baseline.get("chosen") else ""
    differs = baseline.get("differences") or []
    differs_text = f"; differs: {'; '.join(differs)}" if differs else ""
    against = f" against {baseline['source']}" if baseline.get("source") else ""
    return {
        "css": "bad" if baseline["verdict"] == "regression" else "ok",
        "line": f"{baseline['verdict']} (tolerance {baseline['tolerance'] * 100:.0f}%){against}{chosen}{reason}"
        f"{differs_text}",
        "table": _table(
            ("figure", "now", "then", "change"),
            [
                [name, _fmt(m["now"]), _fmt(m["then"]), _change(m["delta_ratio"])]
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
            "compute/iter (ms)",
            "comm wait/iter (ms)",
        ),
        [
            [
                str(s["rank"]),
                s["node"],
                f"{s['excess_ratio'] * 100:.0f}%",
                f"{s['slowest_steps']}/{s['steps']} (p={s['p_value_steps']:.3g})",
                f"{s['last_arrivals']}/{s['collectives']} (p={s['p_value_arrivals']:.3g})",
                _fmt(s["compute_per_iteration_ms"]),
                _fmt(s["comm_wait_per_iteration_ms"]),
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
                _ranges(node["ranks"]),
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


def _analysis(report: dict) -> dict:
    """Top kernels, kernel time by category and the collectives with nccl-tests' bandwidths."""
    kernels = [
        [
            k["name"][:160],
            str(k["count"]),
            _fmt(k["total_ms"]),
            _fmt(k["mean_us"]),
            "" if k["share"] is None else f"{k['share'] * 100:.1f}%",
        ]
        for k in report.get("top_kernels") or []
    ]
    collectives = [
        [
            c["op"],
            _size(c["size_bytes"]),
            _fmt(c["group_size"]),
            str(c["count"]),
            _fmt(c["time_ms"]),
            _fmt(c["mean_ms"]),
            _fmt(c["algbw_gbps"]),
            _fmt(c["busbw_gbps"]),
        ]
        for c in (report.get("collective_table") or [])[:50]
    ]
    return {
        "top_kernels": _table(("kernel", "count", "total (ms)", "mean (us)", "share of GPU time"), kernels, left=True),
        "categories": report.get("kernel_time_by_category_ms") or {},
        "collectives": _table(
            ("op", "size", "ranks", "calls", "time (ms)", "mean (ms)", "algbw (GB/s)", "busbw (GB/s)"), collectives
        ),
    }


def _per_rank(report: dict) -> dict:
    ranks = report["per_rank_summary"]
    shown: list = ranks
    note = ""
    if len(ranks) > PAGE_RANKS:
        # At thousands of ranks a table is not read: the ranks that compute longest, the rest in the CSV.
        shown = sorted(ranks, key=lambda r: -(r.get("compute_per_iteration_ms") or 0.0))[:PAGE_RANKS]
        note = (
            f"The {PAGE_RANKS} of {len(ranks)} ranks that compute longest per iteration; every rank is in per_rank.csv."
        )
    rows = [
        [_fmt(r.get(c)) if c != "rank" or r.get("rank") is not None else "(no rank)" for c in CSV_COLUMNS]
        for r in [*shown, *(report.get("unranked_traces") or [])]
    ]
    return {"per_rank": _table(CSV_COLUMNS, rows), "per_rank_note": note}


def page_model(report: dict) -> dict:
    """Everything report.html shows, as plain text, numbers and SVG geometry, in page order."""
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
    model = {
        "opening": opening_rows(report),
        "warnings": list(report.get("warnings") or []),
        "no_trace": report.get("no_trace"),
        "why": _why(report.get("diagnosis")),
        "baseline": _baseline(report.get("baseline")),
        "tool_notes": list((report.get("tools") or {}).get("notes", [])),
        "headline": _table(
            [title for _key, title, _scale, _means in HEADLINE],
            [[_fmt(perf[k] * scale if perf[k] is not None else None) for k, _t, scale, _m in HEADLINE]],
        ),
        "headline_notes": [(title, means) for _key, title, _scale, means in HEADLINE],
        "checks": checks,
        "missing": _ranges(report["missing_ranks"]) if report["missing_ranks"] else "",
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


_TEMPLATE = None


def template():
    """The compiled page, once per process: compiling costs more than rendering a small report."""
    global _TEMPLATE  # noqa: PLW0603 - a cache
    if _TEMPLATE is None:
        if jinja2 is None:  # pragma: no cover
            raise RuntimeError("report.html needs Jinja2 in the controller's Python (ansible-core requires it)")
        loader = jinja2.DictLoader({"views.svg": VIEWS, "report.html": PAGE})
        env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        env.filters["fmt"] = _fmt
        _TEMPLATE = env.get_template("report.html")
    return _TEMPLATE


def render_html(report: dict) -> str:
    return template().render(page_model(report)) + "\n"


def render_svg(macro: str, geometry: dict) -> str:
    """One of the page's SVG views on its own (heatmap, histogram, rank_bars): for tests and tools."""
    return str(getattr(template().environment.get_template("views.svg").module, macro)(geometry))
