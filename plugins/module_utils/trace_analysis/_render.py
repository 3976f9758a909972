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
import re
import time

try:
    import jinja2
except ImportError:  # pragma: no cover - ansible-core requires Jinja2; module_utils guard their imports
    jinja2 = None  # type: ignore[assignment]

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import TIMELINE_ROWS
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._report_template import PAGE, VIEWS
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import (
    STRAGGLER_ALPHA,
    slow_link_evidence,
    slow_node_text,
    times,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._views import rank_bars, views

# per_rank.csv's columns, each (its name, the per-rank row's key it holds). One word, one meaning:
# a step is one ProfilerStep#N; a rank's CVS iteration is its whole profiled window (total_time_us).
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
        write_text_atomic(paths["timeline"], json.dumps(timeline, separators=(",", ":")) + "\n")
    write_text_atomic(paths["report"], json.dumps(report, indent=2, sort_keys=False) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CSV_COLUMNS, *(f"gpu_{row}_ms" for row in TIMELINE_ROWS)])
    # A trace without rank information (a single process of several) is a row too, rank empty.
    for r in [*report["per_rank_summary"], *(report.get("unranked_traces") or [])]:
        writer.writerow(
            [_cell(r, key) for _name, key in CSV_FIELDS] + [r["gpu_timeline"][row] for row in TIMELINE_ROWS]
        )
    write_text_atomic(paths["csv"], buffer.getvalue())
    # Last: the page links the files written above, and those of the run beside it.
    write_text_atomic(paths["html"], render_html(report, out_dir))
    return paths


def _cell(row: dict, key: str):
    """A per-rank row's value for a CSV column; step_time_ms from iteration_time_ms, its older name,
    in a row made before the rename."""
    if key == "step_time_ms" and key not in row:
        return row.get("iteration_time_ms")
    return row.get(key)


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


# The headline table: (key, heading, scale into the unit the heading names, what it means). One
# word, one meaning, here as in per_rank.csv and docs/results.md: a step is one ProfilerStep#N; the
# CVS iteration is a rank's whole profiled window, as CVS's avg_iteration_time_ms has it.
HEADLINE = (
    (
        "avg_step_time_ms",
        "step (ms)",
        1.0,
        "one ProfilerStep#N (CPU side): each rank's mean step, averaged over ranks (per_rank.csv's step_time_ms)",
    ),
    (
        "avg_iteration_time_ms",
        "CVS iteration: profiled window (ms)",
        1.0,
        "each rank's whole profiled window, first to last GPU event of its trace (TraceLens total_time; "
        "per_rank.csv's total_time_us), averaged over ranks: CVS's avg_iteration_time_ms, which its "
        "max_avg_iteration_ms threshold judges. It spans every profiled step, so it is about that many steps long",
    ),
    (
        "std_iteration_time_us",
        "spread of the CVS iteration across ranks (ms)",
        0.001,
        "its standard deviation over ranks (CVS's std_iteration_time_us)",
    ),
    ("avg_compute_ratio", "compute ratio", 1.0, "computation time / the profiled window"),
    ("avg_comm_ratio", "comm ratio", 1.0, "communication time / the profiled window"),
    ("avg_overlap_ratio", "overlap ratio", 1.0, "communication hidden under computation / communication"),
)

# How the stand-in (tests/standin/) shows itself in run.json's context: its image and its config.
STANDIN_IMAGE = re.compile(r"(^|/)aorta-standin-workload(:|@|$)")
STANDIN_CONFIG = "standin.yaml"
PERFETTO = "https://ui.perfetto.dev"


def _epoch(value) -> str:
    """A controller time as UTC, '' when not recorded."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))


def _rate(value) -> str:
    return f"{value:,.0f}"


def _row(key: str, title: str, text: str, css: str = "", strong: str = "") -> dict:
    return {"id": key, "title": title, "text": text, "css": css, "strong": strong}


def profiled_steps(report: dict) -> int | None:
    """How many steps a rank's profiled window holds (the median over ranks), None when unknown."""
    counts = sorted(
        (r.get("iterations") or {}).get("count") or 0
        for r in report.get("per_rank_summary") or []
        if (r.get("iterations") or {}).get("count")
    )
    return counts[len(counts) // 2] if counts else None


def workload(report: dict) -> tuple:
    """(what ran, whether it is the stand-in): the stand-in said plainly when run.json's image or
    config is the stand-in's; CPU-only traces said too (no GPU event in any rank); else ('', False)."""
    run = report.get("run") or {}
    image, config = str(run.get("image") or ""), str(run.get("base_config") or "")
    marks = []
    if STANDIN_IMAGE.search(image):
        marks.append(f"image {image}")
    if os.path.basename(config) == STANDIN_CONFIG:
        marks.append(f"config {config}")
    if marks:
        return (
            "the CPU stand-in for Aorta (gloo), not real GPU training; figures are not GPU performance"
            f" ({', '.join(marks)})",
            True,
        )
    ranks = report.get("per_rank_summary") or []
    if ranks and not any(r.get("gpu") for r in ranks):
        return (
            "CPU-only traces: no GPU event in any rank's trace (a CPU workload, such as the stand-in for Aorta);"
            " figures are CPU times, not GPU performance",
            False,
        )
    return "", False


def _run_time(run: dict) -> str:
    start, end = _epoch(run.get("started_epoch")), _epoch(run.get("finished_epoch"))
    duration = run.get("duration_seconds")
    took = f" ({duration:.0f} s)" if isinstance(duration, (int, float)) else ""
    if start and end:
        return f"{start} → {end}{took}"
    if start:
        return f"started {start}; its end is not recorded"
    return "not recorded"


def _config(run: dict) -> str:
    base = run.get("base_config") or "base config not recorded"
    overrides = run.get("overrides") or {}
    if isinstance(overrides, dict):
        words = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items())
    else:
        words = str(overrides)
    return f"{base}; overrides: {words}" if words else f"{base}, no overrides"


def _head(run: dict) -> str:
    """The node that led the run, and the rendezvous address on its fabric."""
    head = run.get("head")
    if run.get("master"):
        return f"{head or 'not recorded'}, rendezvous at {run['master']}"
    return f"{head} (nothing launched)" if head else "not recorded"


def _run_rows(run: dict) -> list:
    """The rows of run.json: status, id, times, image, config."""
    if not run.get("record"):
        return [_row("run-status", "run status", run.get("note") or "no run record", "bad")]
    status = run.get("status") or "unknown"
    image = str(run.get("image") or "not recorded") + (f" ({run['image_id']})" if run.get("image_id") else "")
    return [
        _row("run-status", "run status", run.get("message") or "", "ok" if status == "COMPLETED" else "bad", status),
        _row("run-id", "run id", str(run.get("run_id") or "not recorded")),
        _row("run-head", "head", _head(run)),
        _row("run-time", "start, end, duration", _run_time(run)),
        _row("run-image", "image", image),
        _row("run-config", "Aorta config, overrides", _config(run)),
    ]


def _throughput(run: dict, perf: dict) -> str:
    """samples/s and tokens/s with how they were reckoned; an unknown part said in words."""
    samples = run.get("samples_per_second")
    if not samples:
        return run.get("note") or "not known: no run record"
    tokens = run.get("tokens_per_second")
    step = perf.get("avg_step_time_ms")
    text = f"{_rate(samples)} samples/s" + (f" · {_rate(tokens)} tokens/s" if tokens else "")
    text += f" (batch {run['batch_size']} × {run['data_parallel_ranks']} data-parallel ranks / mean step"
    text += f" {step:.3g} ms" if isinstance(step, (int, float)) else ""
    if tokens:
        return text + f"; tokens/s = samples/s × sequence length {run['sequence_length']})"
    return text + "; no tokens/s: the config has no dataset.sequence_length)"


def _step_time(report: dict) -> str:
    """The mean step with its spread, and the CVS iteration beside it: two figures, two words."""
    perf = report["performance"]
    step, spread, window = perf.get("avg_step_time_ms"), perf.get("std_step_time_us"), perf.get("avg_iteration_time_ms")
    if step is None:
        text = "not measured: no ProfilerStep#N in the traces"
    else:
        text = f"{_fmt(step)} ms per step (one ProfilerStep#N, mean over ranks)"
        text += f" ± {_fmt(spread / 1000.0)} ms across ranks" if spread is not None else ""
    if window is not None:
        steps = profiled_steps(report)
        held = f" of {steps} steps" if steps else ""
        text += f"; CVS iteration (each rank's whole profiled window{held}): {_fmt(window)} ms"
    return text


def _finding(report: dict) -> dict:
    finding = [slow_node_text(n) for n in report["slow_nodes"]]
    finding += [
        f"straggler rank {s['rank']} on {s['node']} (+{s['excess_ratio'] * 100:.0f}%)" for s in report["stragglers"]
    ]
    if finding:
        return _row("finding", "slow nodes and ranks", "; ".join(finding), "bad")
    test = report.get("straggler_test") or {}
    if not test:
        return _row("finding", "slow nodes and ranks", "not tested")
    need = _steps_short(report)
    words = "none: no node or rank stands out"
    if need:
        words += f" (but {test.get('steps')} profiled steps are too few to tell; {need} needed: see what next)"
    return _row("finding", "slow nodes and ranks", words, "ok")


SLOW_LINKS_SHOWN = 8  # slow-link rows before one "and N more": the JSON's slow_links names them all


def _sweep_text(sweep: dict) -> tuple:
    """(the ``fabric-sweep`` row's words, its class) for a sweep that named nobody: it found no
    slow link, it could not localise one, or it did not run (why)."""
    if not sweep.get("ran"):
        return f"not run: {sweep.get('why') or 'no reason recorded'}", ""
    median = sweep.get("median_gbps")
    against = f"a median of {median:.3g} Gbit/s" if isinstance(median, (int, float)) else "a median not recorded"
    rounds = sweep.get("rounds")
    how = f"{sweep.get('tool') or 'tool not recorded'}, {rounds} round{'' if rounds == 1 else 's'}"
    how += f", {sweep['seconds']:g} s" if isinstance(sweep.get("seconds"), (int, float)) else ""
    if sweep.get("localisable") is False:
        return f"ran ({how}) against {against} but cannot name a slow node: {sweep.get('reason')}", ""
    threshold = sweep.get("threshold")
    below = f"below {threshold:g}x " if isinstance(threshold, (int, float)) else "below "
    text = f"no slow link: no node {below}{against} in every round ({how})"
    doubts = []
    if sweep.get("unresolved_count"):
        doubts.append(f"{sweep['unresolved_count']} node(s) low in every round but not localised")
    if sweep.get("not_measured_count"):
        doubts.append(f"{sweep['not_measured_count']} node(s) not measured")
    if doubts:
        return f"{text}; {', '.join(doubts)} (run.json's fabric_sweep)", ""
    return text, "ok"


def _fabric_rows(report: dict) -> list:
    """A ``slow-link-<n>`` row per slow link with its evidence (SLOW_LINKS_SHOWN at most, then how
    many more), else one ``fabric-sweep`` row: nothing found, or why the sweep did not run; none for
    a run without a sweep record (an earlier version's, or a bare folder of traces)."""
    links = report.get("slow_links") or []
    if links:
        rows = [
            _row(f"slow-link-{i}", "slow link", slow_link_evidence(link), "bad")
            for i, link in enumerate(links[:SLOW_LINKS_SHOWN], 1)
        ]
        if len(links) > SLOW_LINKS_SHOWN:
            more = f"and {len(links) - SLOW_LINKS_SHOWN} more (the report JSON's slow_links)"
            rows.append(_row("slow-link-more", "slow links", more, "bad"))
        return rows
    sweep = report.get("fabric_sweep")
    if not isinstance(sweep, dict):
        return []
    text, css = _sweep_text(sweep)
    return [_row("fabric-sweep", "fabric sweep", text, css)]


def _named(nodes: list, most: int = 8) -> str:
    """``a, b, ...``: at most ``most`` of the nodes by name, then how many more (the JSON names them all)."""
    return ", ".join(nodes[:most]) + (f" and {len(nodes) - most} more" if len(nodes) > most else "")


def _nodes(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


def _some(nodes: list, most: int = 8) -> str:
    """``n nodes (a, b, ...)``, naming at most ``most`` of them (the JSON names them all)."""
    return f"{_nodes(len(nodes))} ({_named(nodes, most)})"


def no_msgspec_warning(nodes: list) -> str:
    """The report's one warning for the nodes that analysed their own traces with the standard
    library's decoder (no msgspec): ``nodes`` by name, in rank order."""
    return (
        f"{_nodes(len(nodes))} analysed with the standard library's JSON decoder (no msgspec): {_named(nodes)}: "
        "slower, and more memory per file (docs/scale.md)"
    )


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value >= 1 else f"{value:.2f} s"


def _node_analysis_rows(report: dict) -> list:
    """How the nodes that analysed their own traces did it (trace_summary): how many, their median
    and longest analysis time and the slowest; then, when some had no msgspec, the report's warning
    (class ``bad``). No row for a report from full traces, nor for an earlier version's."""
    analysed = report.get("node_analysis")
    if not isinstance(analysed, dict) or not analysed.get("nodes"):
        return []
    text = f"analysed on the nodes: {_nodes(analysed['nodes'])}"
    times = analysed.get("analysis_s") or {}
    if times.get("median") is not None:
        slowest = ", ".join(f"{r.get('node')} ({_seconds(r['analysis_s'])})" for r in analysed.get("slowest") or [])
        text += f" in {_seconds(times['median'])} median, {_seconds(times['max'])} at most (slowest: {slowest})"
    rows = [_row("node-analysis", "analysis", text)]
    if analysed.get("without_msgspec"):
        rows.append(_row("node-analysis-json", "no msgspec", no_msgspec_warning(analysed["without_msgspec"]), "bad"))
    return rows


def _collection_row(report: dict) -> dict | None:
    """How the run's traces were collected when its nodes analysed their own (aorta_collect_traces
    sample or none): the mode and why, and for sample what follows this report (what is pulled, the
    seed, the budget) and where the rest are listed. None for a run collected whole."""
    found = report.get("collection")
    if not isinstance(found, dict) or found.get("mode") not in ("sample", "none"):
        return None
    why = f" ({found['why']})" if found.get("why") else ""
    if found["mode"] == "none":
        text = f"aorta_collect_traces none{why}: no trace left the nodes; this report is made from their summaries"
        return _row("collection", "collection", text)
    text = (
        f"aorta_collect_traces sample{why}: after this report, the traces of the nodes it names, the next node "
        f"after each and {found.get('sample_nodes')} more drawn at random (seed {found.get('seed')}) come to "
        f"combined_traces, within {found.get('budget_gb')} GB; the others stay on their nodes, listed with "
        "their sha256 in combined_traces/manifest.json (on_node), and playbooks/trace_collect.yml pulls any of them"
    )
    return _row("collection", "collection", text)


def _traces_row(report: dict) -> dict | None:
    """Which nodes' traces the report holds in full (to open in Perfetto or TraceLens) and which it
    knows only from the summaries the nodes made (aorta_collect_traces sample or none); none for a report without
    the keys (an earlier version's) or without any rank."""
    full, summed = report.get("traces_in_full") or [], report.get("summaries_only") or []
    if not full and not summed:
        return None
    if not summed:
        text = f"in full here: {_some(full)}"
    elif not full:
        text = f"summaries only, made on the nodes (aorta_parse_on_nodes): {_some(summed)}; no trace in full here"
    else:
        text = f"in full here: {_some(full)}; summaries only, made on the nodes: {_some(summed)}"
    return _row("run-traces", "traces", text)


def opening_rows(report: dict) -> list:
    """What a performance engineer reads first, in this order and before any chart; each row has a
    stable id (docs/results.md lists them). A value that is not known is said in words."""
    run = report.get("run") or {}
    rows = []
    found = report.get("verdict")
    if found:
        # The one verdict first, the same words as run.json's and the console's last line.
        ignored = [n for n in found["notes"] if n.endswith("(aorta_verdict_ignores)")] if found["reasons"] else []
        why = "; ".join((found["reasons"] + ignored) or found["notes"])
        rows.append(_row("verdict", "verdict", why, "ok" if found["verdict"] == "PASS" else "bad", found["verdict"]))
    what, _standin = workload(report)
    if what:
        rows.append(_row("workload", "workload", what, "bad"))
    rows += _run_rows(run)
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
    rows += [row for row in (_traces_row(report), _collection_row(report)) if row]
    rows += _node_analysis_rows(report)
    rows.append(_row("throughput", "throughput", _throughput(run, report["performance"])))
    rows.append(_row("step-time", "step time", _step_time(report)))
    rows.append(_finding(report))
    rows += _fabric_rows(report)
    checks = report["validation"]["checks"]
    if checks:
        failed = [c for c in checks if not c["passed"]]
        passed = f"{len(checks) - len(failed)} of {len(checks)} pass" + (": " + failed[0]["reason"] if failed else "")
        rows.append(_row("thresholds-summary", "thresholds", passed, "bad" if failed else "ok"))
    return rows


# The files a run's results directory holds beside report.html: (name, what it is).
FILES = (
    ("run.json", "the run's record: status, context, every node's outcome"),
    ("aorta_benchmark_report.json", "everything on this page as JSON, CVS's fields first"),
    ("per_rank.csv", "one row per rank (step_time_ms, ratios, compute and exposed communication per step)"),
    ("timeline.json", "every rank on one clock (Chrome trace / Perfetto)"),
    ("junit.xml", "the run as JUnit XML, for a CI system's test view"),
    ("logs/", "each node's whole torchrun output"),
    ("console.log", "the run's own console lines: its start, progress, end table, headline and verdict"),
    ("variables.json", "every aorta_* variable the run used, secrets masked"),
)


def files_beside(report: dict, out_dir: str | None) -> list:
    """Relative links to the files beside report.html in ``out_dir``, each only when it is there;
    junit.xml also in a run's own results directory before the run's last task (run_outcome)
    writes it, after this page."""
    if not out_dir:
        return []
    record = (report.get("run") or {}).get("record") or ""
    own_run = bool(record) and os.path.realpath(os.path.dirname(record)) == os.path.realpath(out_dir)
    found = []
    for name, what in FILES:
        path = os.path.join(out_dir, name)
        there = os.path.isdir(path) if name.endswith("/") else os.path.isfile(path)
        said = what
        if name == "junit.xml" and not there and own_run:
            said += " (written by the run's last task, after this page)"
        elif not there:
            continue
        if name == "logs/":
            logs = [f for f in os.listdir(path) if f.endswith(".log")]
            said += f" ({len(logs)} log{'s' if len(logs) != 1 else ''})"
        found.append({"href": name, "name": name, "what": said, "perfetto": name == "timeline.json"})
    return found


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
    who = f"; {baseline['stands_out']}" if baseline.get("stands_out") else ""
    return {
        "css": "bad" if baseline["verdict"] == "regression" else "ok",
        "line": f"{baseline['verdict']} (tolerance {baseline['tolerance'] * 100:.0f}%){against}{chosen}{reason}"
        f"{differs_text}{who}",
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
        [
            _fmt(_cell(r, key)) if key != "rank" or r.get("rank") is not None else "(no rank)"
            for _name, key in CSV_FIELDS
        ]
        for r in [*shown, *(report.get("unranked_traces") or [])]
    ]
    return {"per_rank": _table(CSV_COLUMNS, rows), "per_rank_note": note}


def _steps_short(report: dict) -> int | None:
    """The profiled steps the straggler test needs when this run's are too few to name anyone (the
    rank test's or the node test's, the larger), else None."""
    test = report.get("straggler_test") or {}
    steps, collectives = test.get("steps") or 0, test.get("collectives") or 0
    needs = [
        t["steps_needed"]
        for t in (test, test.get("node_test") or {})
        if isinstance(t.get("steps_needed"), int) and steps < t["steps_needed"] and collectives < t["steps_needed"]
    ]
    return max(needs) if needs else None


def _next(text: str, command: str = "") -> dict:
    return {"text": text, "command": command}


# The commands below are the collection's own (README.md, docs/health.md, docs/results.md): the
# inventory as -i (the cluster file), or a cluster file as -e aorta_cluster_file (no inventory then);
# "…" stands for the run's other options (aorta_path, the image, the overrides), said on the page.
MULTINODE = "ansible-playbook aorta.cluster.aorta_multinode"


def _next_for_nodes(report: dict, here: str, out_dir: str | None) -> list:
    """What to do about the nodes preflight left out, the slow nodes and the straggler ranks."""
    run = report.get("run") or {}
    items = []
    if run.get("excluded"):
        names = ", ".join(str(e["name"]) for e in run["excluded"][:5]) + (" …" if len(run["excluded"]) > 5 else "")
        healthy = os.path.join(here, "healthy.cluster.json")
        command = f"{MULTINODE} -e aorta_cluster_file={healthy} …"
        if out_dir and not os.path.isfile(healthy):
            command = ""
        items.append(
            _next(
                f"Preflight left out {len(run['excluded'])} node(s): {names} (why: run.json's excluded). Fix them"
                " before measuring on every node; healthy.cluster.json is the cluster file without them, to run"
                " on the others alone:",
                command,
            )
        )
    for node in report["slow_nodes"][:3]:
        items.append(
            _next(
                f"Slow node {node['node']} (ranks {_ranges(node['ranks'])}, +{node['excess_ratio'] * 100:.0f}% compute"
                " per step): check its health and fingerprint (run.json's nodes[]); to measure without it, copy"
                " your cluster file without its node_dict entry and run on the copy:",
                f"{MULTINODE} -e aorta_cluster_file=<the copy> …",
            )
        )
    timeline = not out_dir or os.path.isfile(os.path.join(out_dir, "timeline.json"))
    files = {r.get("rank"): r.get("file") for r in report.get("per_rank_summary") or []}
    for s in report["stragglers"][:3]:
        where = (
            f"open {PERFETTO} → Open trace file → timeline.json, process 'rank {s['rank']} · {s['node']}'"
            if timeline
            else f"its trace is {files.get(s['rank'])}"
        )
        items.append(
            _next(
                f"Straggler rank {s['rank']} on {s['node']} (+{s['excess_ratio'] * 100:.0f}% compute per step): see"
                f" what its steps spend longer on than its peers': {where}."
            )
        )
    return items


def _next_for_links(report: dict) -> list:
    """What to do about a slow link the fabric sweep named: where to look, and how to keep such a
    node out of a run before its ranks start."""
    links = report.get("slow_links") or []
    if not links:
        return []
    names = ", ".join(str(link.get("node")) for link in links[:5]) + (" …" if len(links) > 5 else "")
    return [
        _next(
            f"Slow fabric link on {names} (the sweep before the ranks started): check that node's fabric interface"
            " (its speed and MTU in run.json's nodes[].fingerprint and drift, its error counters in nodes[].link),"
            " cable and switch port. To stop a run before its ranks start on a node below a rate (it then goes into"
            " unhealthy.txt, and healthy.cluster.json leaves it out):",
            f"{MULTINODE} -i <your inventory> -e aorta_fabric_min_gbps=<Gbit/s> …",
        )
    ]


def _next_for_figures(report: dict, run: dict) -> list:
    """What to do about a regression against the baseline, thresholds not met with no one to blame,
    or too few profiled steps to name anyone."""
    items = []
    base = report.get("baseline") or {}
    if base.get("verdict") == "regression":
        change = _change(((base.get("metrics") or {}).get("avg_step_time_ms") or {}).get("delta_ratio"))
        differs = base.get("differences") or []
        items.append(
            _next(
                f"Step time {change or 'longer'} against the baseline {base.get('source')}: compare the two runs'"
                " run.json (context, nodes[].fingerprint)"
                + (f"; they differ in: {'; '.join(differs)}" if differs else "")
                + ". The next run against the same baseline:",
                f"{MULTINODE} -i <your inventory> -e aorta_baseline={base.get('source')} …",
            )
        )
    named = report["slow_nodes"] or report["stragglers"]
    failed = [c for c in report["validation"]["checks"] if not c["passed"]]
    if failed:
        text = f"Threshold(s) not met ({', '.join(c['name'] for c in failed)})"
        command = ""
        if not named and not items:
            text += " and no node or rank stands out: the cluster as a whole is below aorta_expected_results"
            command = f"{MULTINODE} -i <your inventory> -e aorta_baseline=auto …"
        text += "."
        perf = report["performance"]
        if any(c["name"] == "max_avg_iteration_ms" for c in failed) and perf.get("avg_step_time_ms") is not None:
            steps = profiled_steps(report)
            text += (
                " max_avg_iteration_ms judges the CVS iteration, each rank's whole profiled window"
                f"{f' of {steps} steps' if steps else ''} ({_fmt(perf.get('avg_iteration_time_ms'))} ms), not one"
                f" step ({_fmt(perf['avg_step_time_ms'])} ms)."
            )
        items.append(_next(text + (" Compare with the last comparable run:" if command else ""), command))
    need = None if named else _steps_short(report)
    if need:
        overrides = dict(run.get("overrides") or {}) if isinstance(run.get("overrides"), dict) else {}
        overrides["profiling.active"] = need
        extra = json.dumps({"aorta_training_overrides": overrides})
        items.append(
            _next(
                f"{(report.get('straggler_test') or {}).get('steps')} profiled steps are too few to name a slow node"
                f" or rank at {STRAGGLER_ALPHA:.0%} significance: profile at least {need} (training.max_steps must"
                " cover profiling.wait + warmup + active):",
                f"{MULTINODE} -i <your inventory> -e '{extra}' …",
            )
        )
    return items


def what_next(report: dict, out_dir: str | None = None) -> list:
    """What to do about this run, finding by finding, each with the command to run when there is
    one ({'text', 'command'}); a healthy run has nothing to do."""
    run = report.get("run") or {}
    here = os.path.abspath(out_dir) if out_dir else "<results dir>"
    items = []
    status = run.get("status")
    if run.get("record") and status not in (None, "COMPLETED"):
        why = "'Why it stopped' below and " if report.get("diagnosis") else ""
        items.append(_next(f"The run ended {status}: read {why}each node's log (logs/<node>.log)."))
    items += _next_for_nodes(report, here, out_dir)
    items += _next_for_links(report)
    items += _next_for_figures(report, run)
    if not items:
        verdict = (report.get("verdict") or {}).get("verdict")
        items.append(
            _next("Nothing to do: the run passed and no node or rank stands out.")
            if verdict in (None, "PASS")
            else _next(f"The verdict is {verdict}: its reasons are in the first row.")
        )
    _what, standin = workload(report)
    if standin:
        items.append(
            _next(
                "This was the stand-in: for GPU figures, run Aorta itself on GPU nodes (docs/quickstart.md):",
                f"{MULTINODE} -i <your inventory> -e aorta_path=<Aorta checkout on every node>"
                " -e aorta_docker_image=<Aorta's image>",
            )
        )
    return items


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


def render_html(report: dict, out_dir: str | None = None) -> str:
    """report.html; with ``out_dir`` (where it is written) it links the files beside it."""
    return template().render(page_model(report, out_dir)) + "\n"


def render_svg(macro: str, geometry: dict) -> str:
    """One of the page's SVG views on its own (heatmap, histogram, rank_bars): for tests and tools."""
    return str(getattr(template().environment.get_template("views.svg").module, macro)(geometry))
