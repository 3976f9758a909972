# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's opening rows: what a performance engineer reads first (the verdict, what ran, the
run, the finding, the fabric, the collection, the thresholds), and the files beside the page.

Private to this collection; controller side. Plain text and numbers only: the template lays out.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import (
    slow_link_evidence,
    slow_node_text,
)

# per_rank.csv's columns, each (its name, the per-rank row's key it holds). One word, one meaning:


def ranges(ranks) -> str:
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


def fmt(value, digits=3) -> str:
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
        text = f"{fmt(step)} ms per step (one ProfilerStep#N, mean over ranks)"
        text += f" ± {fmt(spread / 1000.0)} ms across ranks" if spread is not None else ""
    if window is not None:
        steps = profiled_steps(report)
        held = f" of {steps} steps" if steps else ""
        text += f"; CVS iteration (each rank's whole profiled window{held}): {fmt(window)} ms"
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
    need = steps_short(report)
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


def percent_change(delta) -> str:
    return "" if delta is None else f"{delta * 100:+.1f}%"


def steps_short(report: dict) -> int | None:
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
