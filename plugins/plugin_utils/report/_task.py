# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The trace_parse task (its action runs it in the controller's own Python): the report made from the
traces or the nodes' summaries, judged (the one verdict), compared with a baseline and written.

Private to this collection; controller side.
"""

from __future__ import annotations

import sys

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _decode, _findings
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._baseline import (
    TOLERANCE,
    compare_baseline,
    stands_out,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import reason
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import (
    ReportError,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import (
    THRESHOLD,
    fails_exit,
    verdict,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.report._outputs import write_outputs
from ansible_collections.aorta.cluster.plugins.plugin_utils.report._report import build_report
from ansible_collections.aorta.cluster.plugins.plugin_utils.report._run_facts import (
    fabric_findings,
    read_run_record,
    run_summary,
)

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
    "fail_on_verdict": {"type": "bool", "default": False},
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
    report["verdict"] = None  # judged last (below), kept in its place among the report's keys
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
    """Why the task fails ('' when it does not): the one exit rule (``_verdict.fails_exit``: the
    run's status, a finding not ignored, a threshold not met with ``fail_on_threshold``) on a folder
    of traces given alone (``fail_on_verdict``); after a run, run_outcome fails the play once
    everything is written. Said as the verdict's reasons: the status, ``thresholds not met: ...``,
    ``found: ...``."""
    verdict = report["verdict"]
    if not p.get("fail_on_verdict") or not fails_exit(verdict, p["fail_on_threshold"]):
        return ""
    findings = [reason(kind, found[kind]) for kind in verdict["findings"]]
    thresholds = [r[len(THRESHOLD) :] for r in verdict["reasons"] if r.startswith(THRESHOLD)]
    problems = [r for r in verdict["reasons"] if not r.startswith(THRESHOLD) and r not in findings]
    if thresholds and p["fail_on_threshold"]:
        problems.append("thresholds not met: " + "; ".join(thresholds))
    if findings:
        problems.append("found: " + "; ".join(findings))
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
