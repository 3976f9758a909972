# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's files: aorta_benchmark_report.json, timeline.json, per_rank.csv and report.html
(with PNG plots when matplotlib is installed).

Private to this collection; controller side (the node-side summary never ships it).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import statistics
import time

from ansible_collections.aorta.cluster.plugins.module_utils._analysis import TIMELINE_ROWS
from ansible_collections.aorta.cluster.plugins.module_utils._stragglers import STRAGGLER_ALPHA
from ansible_collections.aorta.cluster.plugins.module_utils._views import views_html

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


PLOT_RANKS = 32  # per-rank bar charts up to this many ranks
PAGE_RANKS = 256  # above this the page keeps the ranks that compute longest; per_rank.csv has all


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


def _plots(report: dict) -> list:
    try:
        import matplotlib  # noqa: PLC0415 - optional, controller only

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt  # noqa: PLC0415
    except ImportError:
        return []
    ranks = report["per_rank_summary"]
    if not ranks or len(ranks) > PLOT_RANKS:
        return []  # a bar per rank stops reading past a few dozen: the heat maps show every rank
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


def _esc(value) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _fmt(value, digits=3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _esc(value)


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


def _opening_html(report: dict) -> str:
    """What a performance engineer reads first, in this order and before any chart; each row has a
    stable id."""
    run = report.get("run") or {}
    perf = report["performance"]
    rows = []

    def row(key, title, value, css=""):
        rows.append(f"<tr id='{key}'><th>{title}</th><td class='{css}' style='text-align:left'>{value}</td></tr>")

    if run.get("record"):
        status = run.get("status") or "-"
        row(
            "run-status",
            "run status",
            f"<b>{_esc(status)}</b> &middot; {_esc(run.get('message') or '')}",
            "ok" if status == "COMPLETED" else "bad",
        )
        row("run-id", "run id", _esc(run.get("run_id")))
        duration = run.get("duration_seconds")
        row(
            "run-time",
            "start, end, duration",
            f"{_epoch(run.get('started_epoch'))} &rarr; {_epoch(run.get('finished_epoch'))}"
            + (f" ({duration:.0f} s)" if isinstance(duration, (int, float)) else ""),
        )
        image = _esc(run.get("image") or "-") + (f" ({_esc(run['image_id'])})" if run.get("image_id") else "")
        row("run-image", "image", image)
        overrides = run.get("overrides") or {}
        row(
            "run-config",
            "Aorta config, overrides",
            f"{_esc(run.get('base_config') or '-')}, {_esc(json.dumps(overrides))}",
        )
    else:
        row("run-status", "run status", _esc(run.get("note") or "no run record"), "bad")
    gpus = run.get("gpus_per_node") or report["cluster"]["gpus_per_node"]
    row(
        "run-size",
        "nodes &times; GPUs",
        f"{report['cluster']['nodes']} &times; {_esc(gpus)} ({len(report['per_rank_summary'])} ranks analysed; "
        f"analysis {_esc(report['status'])}, counting {_esc(report['counting'])})",
    )
    if run.get("samples_per_second"):
        tokens = run.get("tokens_per_second")
        row(
            "throughput",
            "throughput",
            f"{_rate(run['samples_per_second'])} samples/s"
            + (f" &middot; {_rate(tokens)} tokens/s" if tokens else "")
            + f" (batch {_esc(run['batch_size'])} &times; {run['data_parallel_ranks']} data-parallel ranks"
            f" / mean step; tokens: &times; sequence length {_esc(run.get('sequence_length') or '-')})",
        )
    else:
        row("throughput", "throughput", _esc(run.get("note") or "not known: no run record"), "")
    step, spread = perf.get("avg_step_time_ms"), perf.get("std_step_time_us")
    row(
        "step-time",
        "step time",
        f"{_fmt(step)} ms &plusmn; {_fmt(spread / 1000.0 if spread is not None else None)} ms across ranks",
    )
    finding = [f"slow node {_esc(n['node'])} (+{n['excess_ratio'] * 100:.0f}% compute)" for n in report["slow_nodes"]]
    finding += [
        f"straggler rank {s['rank']} on {_esc(s['node'])} (+{s['excess_ratio'] * 100:.0f}%)"
        for s in report["stragglers"]
    ]
    test = report.get("straggler_test") or {}
    verdicts = f"ranks: {test.get('verdict', '-')}; nodes: {(test.get('node_test') or {}).get('verdict', '-')}"
    row("finding", "slow nodes and ranks", "; ".join(finding) or _esc(verdicts), "bad" if finding else "ok")
    checks = report["validation"]["checks"]
    if checks:
        failed = [c for c in checks if not c["passed"]]
        row(
            "thresholds-summary",
            "thresholds",
            f"{len(checks) - len(failed)} of {len(checks)} pass" + (": " + _esc(failed[0]["reason"]) if failed else ""),
            "bad" if failed else "ok",
        )
    return "<table id='opening'>" + "".join(rows) + "</table>"


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


def _size(size_bytes) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


def _analysis_html(report: dict) -> str:
    """Top kernels, kernel time by category and the collectives with nccl-tests' bandwidths."""
    parts = []
    kernels = report.get("top_kernels") or []
    if kernels:
        parts.append(
            "<h2 id='top-kernels'>Top kernels (every rank)</h2><table><tr><th>kernel</th><th>count</th>"
            "<th>total (ms)</th><th>mean (us)</th><th>share of GPU time</th></tr>"
        )
        for k in kernels:
            share = "" if k["share"] is None else f"{k['share'] * 100:.1f}%"
            parts.append(
                f"<tr><td style='text-align:left'>{_esc(k['name'][:160])}</td><td>{k['count']}</td>"
                f"<td>{_fmt(k['total_ms'])}</td><td>{_fmt(k['mean_us'])}</td><td>{share}</td></tr>"
            )
        parts.append("</table>")
    categories = report.get("kernel_time_by_category_ms") or {}
    if categories:
        parts.append("<h2 id='kernel-categories'>Kernel time by category (every rank, ms)</h2><table><tr>")
        parts.append("".join(f"<th>{_esc(c)}</th>" for c in categories) + "</tr><tr>")
        parts.append("".join(f"<td>{_fmt(v)}</td>" for v in categories.values()) + "</tr></table>")
    collectives = report.get("collective_table") or []
    if collectives:
        parts.append(
            "<h2 id='collectives'>Collectives</h2><p>Kernel time of each collective call, by operation, size and "
            "group; algbw = size / mean time, busbw = algbw &times; nccl-tests' factor (all_reduce 2(n-1)/n, "
            "all_gather, reduce_scatter and all_to_all (n-1)/n, broadcast, reduce and send/recv 1).</p>"
            "<table><tr><th>op</th><th>size</th><th>ranks</th><th>calls</th><th>time (ms)</th>"
            "<th>mean (ms)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th></tr>"
        )
        for c in collectives[:50]:
            parts.append(
                f"<tr><td>{_esc(c['op'])}</td><td>{_size(c['size_bytes'])}</td><td>{_fmt(c['group_size'])}</td>"
                f"<td>{c['count']}</td><td>{_fmt(c['time_ms'])}</td><td>{_fmt(c['mean_ms'])}</td>"
                f"<td>{_fmt(c['algbw_gbps'])}</td><td>{_fmt(c['busbw_gbps'])}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts)


def render_html(report: dict) -> str:
    perf = report["performance"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Aorta benchmark report</title><style>"
        "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}"
        ".bad{color:#b00020;font-weight:bold}.ok{color:#1b7f3b}img{max-width:100%}</style></head><body>",
        "<h1>Aorta benchmark report</h1>",
        _opening_html(report),
        "".join(f"<p class='bad' id='warning'>Warning: {_esc(w)}</p>" for w in report.get("warnings") or []),
        f"<p class='bad' id='no-trace'>{_esc(report['no_trace'])}</p>" if report.get("no_trace") else "",
        _why_html(report.get("diagnosis")),
        _baseline_html(report.get("baseline")),
        "".join(f"<p class='bad'>{_esc(note)}</p>" for note in (report.get("tools") or {}).get("notes", [])),
        "<h2 id='headline'>Headline</h2><table><tr>"
        + "".join(f"<th>{title}</th>" for _key, title, _scale, _means in HEADLINE)
        + "</tr><tr>"
        + "".join(f"<td>{_fmt(perf[k] * scale if perf[k] is not None else None)}</td>" for k, _t, scale, _m in HEADLINE)
        + "</tr></table><ul>"
        + "".join(f"<li>{title}: {_esc(means)}</li>" for _key, title, _scale, means in HEADLINE)
        + "</ul>",
    ]
    if report["validation"]["checks"]:
        parts.append("<h2>Thresholds</h2><ul>")
        for check in report["validation"]["checks"]:
            css = "ok" if check["passed"] else "bad"
            verdict = "SKIP" if check.get("skipped") else "PASS" if check["passed"] else "FAIL"
            parts.append(f"<li class='{css}'>{verdict}: {_esc(check['reason'])}</li>")
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
    else:
        parts.append(f"<p class='ok'>{_esc(test.get('verdict', 'No rank stands out.'))}</p>")
    # A throttled node slows all its ranks together, so none of them is alone the slowest rank.
    node_test = test.get("node_test") or {}
    if report["slow_nodes"]:
        parts.append(
            "<table id='slow-nodes'><tr><th>slow node</th><th>ranks</th><th>excess compute</th>"
            "<th>slowest node in steps</th><th>arrived last</th>"
            "<th>its compute vs the median node, per step (ms)</th></tr>"
        )
        for node in report["slow_nodes"]:
            steps = ", ".join(
                f"{s['node_compute_ms']:.1f}/{s['median_node_compute_ms']:.1f}" for s in node.get("per_step", [])[:8]
            )
            parts.append(
                f"<tr class='bad'><td>{_esc(node['node'])}</td><td>{_esc(_ranges(node['ranks']))}</td>"
                f"<td>{node['excess_ratio'] * 100:.0f}%</td>"
                f"<td>{node.get('slowest_steps', 0)}/{node.get('steps', 0)} (p={node.get('p_value_steps', 1):.3g})</td>"
                f"<td>{node.get('last_arrivals', 0)}/{node.get('collectives', 0)} "
                f"(p={node.get('p_value_arrivals', 1):.3g})</td><td>{_esc(steps)}</td></tr>"
            )
        parts.append("</table>")
    elif node_test.get("verdict"):
        parts.append(f"<p class='ok'>Nodes: {_esc(node_test['verdict'])}</p>")
    if test:
        parts.append(
            f"<p>Test: a rank is named when being alone the slowest that often, in the profiled steps or at"
            f" the collectives, has under {test.get('alpha', STRAGGLER_ALPHA):.0%} chance from noise across"
            f" {test.get('ranks')} ranks (binomial, Bonferroni), and its compute exceeds the median by more than"
            f" {test.get('threshold', 0) * 100:.0f}%; {test.get('steps')} steps,"
            f" {test.get('collectives')} collectives. A node is named the same way among the"
            f" {node_test.get('nodes', 0)} nodes, from the median of its ranks: slow as a whole, it has no rank"
            " slower than its own node's others.</p>"
        )
    if report["missing_ranks"]:
        parts.append(f"<p class='bad'>Missing ranks: {_esc(_ranges(report['missing_ranks']))}</p>")
    for error in report["errors"]:
        if error["error"] != report.get("no_trace"):  # said at the top
            parts.append(f"<p class='bad'>{_esc(error['error'])}</p>")
    paired = report.get("paired_files") or []
    if paired:
        parts.append(
            f"<p id='paired'>{len(paired)} rank profile(s) were written twice by Aorta (TensorBoard's "
            "*.pt.trace.json and the Chrome trace of the same window: profiling.tensorboard and chrome_trace "
            "both on); each window is analysed once, from the Chrome trace. Set profiling.tensorboard=false "
            "in aorta_training_overrides to halve what is collected.</p>"
        )
    skipped = report.get("skipped_files") or []
    if skipped:
        names = ", ".join(_esc(s["file"]) for s in skipped[:5]) + (
            f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        )
        parts.append(f"<p>Skipped, not profiler traces: {names}</p>")
    parts.append(views_html(report, (report.get("straggler_test") or {}).get("threshold") or 0.1))
    parts.append(_analysis_html(report))
    for title, image in _plots(report):
        parts.append(f"<h2>{_esc(title)}</h2><img alt='{_esc(title)}' src='data:image/png;base64,{image}'>")
    ranks = report["per_rank_summary"]
    shown: list = ranks
    parts.append("<h2 id='per-rank'>Per rank</h2>")
    if len(ranks) > PAGE_RANKS:
        # At thousands of ranks a table is not read: the ranks that compute longest, the rest in the CSV.
        shown = sorted(ranks, key=lambda r: -(r.get("compute_per_iteration_ms") or 0.0))[:PAGE_RANKS]
        parts.append(
            f"<p>The {PAGE_RANKS} of {len(ranks)} ranks that compute longest per iteration; every rank is in "
            "per_rank.csv.</p>"
        )
    parts.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in CSV_COLUMNS) + "</tr>")
    for r in [*shown, *(report.get("unranked_traces") or [])]:
        cells = [_fmt(r.get(c)) if c != "rank" or r.get("rank") is not None else "(no rank)" for c in CSV_COLUMNS]
        parts.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    parts.append("</table></body></html>\n")
    return "".join(parts)
