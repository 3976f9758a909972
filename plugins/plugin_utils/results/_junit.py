# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One run as JUnit XML, for a CI system's test view (controller side, pure, standard library only).

Private to this collection. ``junit_xml(run, report)`` reads run.json (``run``) and the run's
aorta_benchmark_report.json (``report``, None when no report was made) and returns the whole
document: ``<testsuites>`` holding one ``<testsuite name="aorta.cluster run <run_id>">``.

The testcases, ``classname``: ``name``, in this order:

- ``aorta.run``: ``status`` (passes when COMPLETED, skipped when STOPPED, else fails with the run's
  message) and ``verdict`` (only when run.json has one: fails on FAIL with its reasons).
- ``aorta.<node>``: ``rank <rank> <node>: <stage>`` for each node of run.json, in its order (the
  node's rank as its row has it, ``-`` for a node preflight excluded; the node's name as it is, so
  a viewer that splits a classname at its last dot still finds the node whole in the name), and
  each stage: ``health`` (preflight), ``launch``, ``run``, ``collect``. A stage that failed on the
  node fails; one the node never reached is skipped, saying why (setup stopped on another node,
  the node was excluded as unhealthy, the user stopped the run, no collection happened). In a run
  that failed or timed out, the first failing node's ``run`` fails with its own reason; every other
  node that did not end ok fails naming that node ("stopped after node X failed: ...").
- ``aorta.thresholds``: one per check of ``validation.checks`` named after it; a single
  ``thresholds`` testcase, skipped, when no threshold was set, there is no report or it analysed no
  trace (the verdict judges none then either).
- ``aorta.findings``: ``slow nodes``, ``stragglers``, ``slow link`` (run.json's fabric sweep, with
  the report's collective figures when there is a report), ``drift`` and ``link errors`` (from
  run.json) and ``baseline``: the lines of ``_findings``, as the verdict reads them. A finding fails
  when it is present, naming the node or rank and the figure (skipped, saying so, when its kind is
  in the verdict's ``ignored``: aorta_verdict_ignores), and passes when absent; ``slow link`` is
  skipped, saying why, when the sweep did not run or could not localise a node; without a report
  ``slow nodes``, ``stragglers`` and ``baseline`` are skipped, "no report: <why>".

Every ``message`` is one line of at most MESSAGE_CHARS characters; the element's text holds the
detail. Of run.json only these are read: run_id, status, message, first_failure, failed_nodes,
started_epoch, finished_epoch, excluded, unhealthy, drift, link_errors, fabric_sweep (ran, why,
localisable, reason, slow), combined_traces (nodes_not_collected, missing_ranks), collection_error,
diagnosis (summary, behind, node_trouble), verdict (and its ``ignored``), and of each node row name, rank, state,
exit_code, failure, progress and reasons (whether preflight left a fingerprint, health or fabric
interface is asked, never copied); of the report, validation.checks, slow_nodes, stragglers,
straggler_test's verdicts, slow_links and baseline."""

from __future__ import annotations

import datetime
import re
import xml.etree.ElementTree as ET
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _findings
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import KINDS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._diagnosis import where_it_was
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import how_it_ended

STAGES = ("health", "launch", "run", "collect")
MESSAGE_CHARS = 300
DETAIL_CHARS = 4000
# The task of roles/container_launch/tasks/main.yml as the launch play's rescue records it: a node
# whose setup stopped at it failed its launch, any other stop is its preflight's (health).
LAUNCH_TASK = "Launch on every node at once"
_LAUNCH_STOP = re.compile(rf"(?:^|: )(?:{re.escape(LAUNCH_TASK)}|launch): ", re.IGNORECASE)
# What XML 1.0 cannot hold (a log line's terminal escapes): dropped, or the document would not parse.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ELLIPSIS = "\u2026"


def _clean(text: Any) -> str:
    return _NOT_XML.sub("", str(text))


def one_line(text: Any, limit: int = MESSAGE_CHARS) -> str:
    """``text`` as one line of at most ``limit`` characters: whitespace runs made one space, the
    end cut with an ellipsis."""
    line = " ".join(_clean(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + _ELLIPSIS


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def case(classname: str, name: str, outcome: str = "", message: Any = "", detail: Any = "", kind: str = "") -> dict:
    """A testcase: ``outcome`` '' (passed), 'failure' or 'skipped'."""
    return {
        "classname": classname,
        "name": name,
        "outcome": outcome,
        "message": message,
        "detail": detail,
        "type": kind,
    }


def _facts(run: Mapping[str, Any]) -> dict[str, Any]:
    """What every node's testcases need of the run, read once."""
    rows = [_dict(row) for row in _list(run.get("nodes"))]
    status = str(run.get("status") or "")
    first = run.get("first_failure")
    excluded = {str(_dict(e).get("name")): _list(_dict(e).get("reasons")) for e in _list(run.get("excluded"))}
    excluded |= {str(r.get("name")): _list(r.get("reasons")) for r in rows if r.get("state") == "excluded"}
    unhealthy = {str(_dict(u).get("name")): _list(_dict(u).get("reasons")) for u in _list(run.get("unhealthy"))}
    launched = any(r.get("state") not in ("not_started", "excluded") for r in rows)
    not_launched = ""
    if rows and not launched:
        if status == "STOPPED":
            not_launched = "not launched: stopped by the user"
        elif first:
            not_launched = f"not launched: setup stopped on node {first}"
        else:
            not_launched = f"not launched: {run.get('message') or status or 'setup stopped'}"
    by_name = {str(r.get("name")): r for r in rows}
    first_row = by_name.get(str(first)) if first is not None else None
    return {
        "status": status,
        "first": None if first is None else str(first),
        "first_reason": _first_reason(run, first_row),
        "excluded": excluded,
        "unhealthy": unhealthy,
        "failed_nodes": {str(n) for n in _list(run.get("failed_nodes"))},
        "not_launched": not_launched,
        "combined": run.get("combined_traces"),
        "collection_error": str(run.get("collection_error") or ""),
    }


def _first_reason(run: Mapping[str, Any], row: Mapping[str, Any] | None) -> str:
    """What the others' run testcases say of the first failing node: what went wrong on it."""
    if row is None:
        return str(run.get("message") or "")
    return "; ".join(_node_findings(run, row)) or how_it_ended(row)


def _behind_text(row: Mapping[str, Any]) -> str:
    """One rank the diagnosis singled out, as its summary says it."""
    text = f"rank {row.get('rank')}"
    if row.get("exception"):
        text += f" raised {row['exception']}: {row.get('message') or ''}".rstrip(": ")
    elif row.get("exit_code") is not None:
        text += f" exit {row['exit_code']}" + (f" at {row['at']}" if row.get("at") else "")
    return text + where_it_was(row)


def _node_findings(run: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """What went wrong on the node: what the diagnosis found on it (its own trouble, the ranks it
    singled out), else torchrun's root cause."""
    name = str(row.get("name"))
    why = _dict(run.get("diagnosis"))
    found = [str(_dict(t).get("text")) for t in _list(why.get("node_trouble")) if str(_dict(t).get("node")) == name]
    found += [_behind_text(_dict(b)) for b in _list(why.get("behind")) if str(_dict(b).get("node")) == name]
    failure = _dict(row.get("failure"))
    if not found and failure.get("root_cause_rank") is not None:
        text = f"rank {failure['root_cause_rank']} exit {failure.get('root_cause_exit')}"
        text += f" at {failure.get('root_cause_time')}" if failure.get("root_cause_time") else ""
        found.append(text + (" after a peer failed" if failure.get("secondary") else ""))
    return found


def _node_reason(run: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """How the node's run ended, in a line: its state and exit code, then ``_node_findings``."""
    found = _node_findings(run, row)
    head = how_it_ended(row)
    return f"{head}: {'; '.join(found)}" if found else head


def _node_detail(run: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """The element text of a node's failed run: its own reason, its steps, the run's message."""
    progress = _dict(row.get("progress"))
    steps = ", ".join(f"{rank}: {count}" for rank, count in progress.items())
    lines = [f"node {row.get('name')} (rank {row.get('rank')}): {_node_reason(run, row)}"]
    lines += [f"steps per rank: {steps}"] if steps else []
    lines.append(f"run: {run.get('status')} - {run.get('message')}")
    summary = _dict(run.get("diagnosis")).get("summary")
    return "\n".join([*lines, f"diagnosis: {summary}"] if summary else lines)


def _setup_stop(facts: Mapping[str, Any], name: str, run: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(stage, reasons) where the node's own setup step failed: 'launch' when the launch task or
    its check stopped it, else 'health' (preflight); ('', []) when it did not. Judged by the node's
    own reasons (run.json's ``unhealthy``: its preflight's, else what its rescue recorded); the
    run's message, what the first failing node's rescue recorded, is added to that node's."""
    own = [str(r) for r in facts["unhealthy"].get(name) or []]
    said = str(run.get("message") or "") if facts["not_launched"] and name == facts["first"] else ""
    if not own and not said and facts["not_launched"] and name in facts["failed_nodes"]:
        own = ["setup failed on this node"]
    judged = own or [said]
    if not any(judged):
        return "", []
    stage = "launch" if any(_LAUNCH_STOP.search(r) for r in judged) else "health"
    return stage, [*own, said] if said and said not in own else own or [said]


def _excluded_why(facts: Mapping[str, Any], name: str) -> str:
    reasons = facts["excluded"].get(name)
    if reasons is None:
        return ""
    return "excluded as unhealthy: " + ("; ".join(str(r) for r in reasons) or "preflight failed")


def _early_cases(facts: Mapping[str, Any], row: Mapping[str, Any], run: Mapping[str, Any], where: str) -> list[dict]:
    """The node's ``health`` and ``launch`` testcases."""
    name = str(row.get("name"))
    excluded = _excluded_why(facts, name)
    stage, reasons = _setup_stop(facts, name, run)
    if excluded:
        health = case(where, "health", "failure", excluded, "\n".join(facts["excluded"][name]), "excluded")
    elif stage == "health":
        health = case(where, "health", "failure", reasons[0], "\n".join(reasons), "preflight")
    elif facts["not_launched"] and not (row.get("fingerprint") or row.get("health") or row.get("fabric_if")):
        health = case(where, "health", "skipped", facts["not_launched"].replace("not launched", "not probed", 1))
    else:
        health = case(where, "health")
    if excluded:
        launch = case(where, "launch", "skipped", excluded)
    elif stage == "launch":
        launch = case(where, "launch", "failure", reasons[0], "\n".join(reasons), "launch")
    elif facts["not_launched"]:
        launch = case(where, "launch", "skipped", facts["not_launched"])
    elif row.get("state") == "not_started":
        launch = case(where, "launch", "skipped", "not started on this node")
    else:
        launch = case(where, "launch")
    return [health, launch]


def _run_case(facts: Mapping[str, Any], row: Mapping[str, Any], run: Mapping[str, Any], where: str) -> dict:
    """The node's ``run`` testcase: its own reason on the first failing node, the others' naming it."""
    name, state = str(row.get("name")), str(row.get("state"))
    skipped = _excluded_why(facts, name) or facts["not_launched"]
    if not skipped and facts["status"] == "STOPPED":
        skipped = "stopped by the user"
    if not skipped and state == "not_started":
        skipped = "not started on this node"
    if skipped:
        return case(where, "run", "skipped", skipped)
    if state == "ok":
        return case(where, "run")
    first = facts["first"]
    if first is None or first == name:
        message = _node_reason(run, row)
    elif facts["status"] == "TIMEOUT":
        message = f"timed out waiting for node {first}: {facts['first_reason']}"
    elif facts["status"] == "FAILED":
        message = f"stopped after node {first} failed: {facts['first_reason']}"
    else:
        message = f"stopped after node {first}: {facts['first_reason']}"
    return case(where, "run", "failure", message, _node_detail(run, row), state)


def _collect_case(facts: Mapping[str, Any], row: Mapping[str, Any], where: str) -> dict:
    """The node's ``collect`` testcase: failed when its traces did not arrive or collection stopped on it."""
    name = str(row.get("name"))
    skipped = _excluded_why(facts, name) or facts["not_launched"]
    if skipped:
        return case(where, "collect", "skipped", skipped)
    error = facts["collection_error"]
    if error.startswith(f"{name}: "):
        return case(where, "collect", "failure", f"collection stopped: {error}", error)
    combined = _dict(facts["combined"])
    if facts["combined"] is None:
        why = f"collection stopped on another node: {error}" if error else "no traces were collected for this run"
        return case(where, "collect", "skipped", why)
    if name in [str(n) for n in _list(combined.get("nodes_not_collected"))]:
        missing = _list(combined.get("missing_ranks"))
        detail = f"missing ranks of the run: {', '.join(str(r) for r in missing)}" if missing else ""
        return case(where, "collect", "failure", "traces not collected from this node", detail)
    return case(where, "collect")


def _node_cases(run: Mapping[str, Any], facts: Mapping[str, Any]) -> list[dict]:
    cases = []
    for row in (_dict(r) for r in _list(run.get("nodes"))):
        name = str(row.get("name"))
        rank = "-" if row.get("rank") is None else row.get("rank")
        where = f"aorta.{name}"
        found = [
            *_early_cases(facts, row, run, where),
            _run_case(facts, row, run, where),
            _collect_case(facts, row, where),
        ]
        cases += [dict(case, name=f"rank {rank} {name}: {case['name']}") for case in found]
    return cases


def _run_cases(run: Mapping[str, Any]) -> list[dict]:
    """``aorta.run``: the run's status, and its verdict when run.json has one."""
    status, message = str(run.get("status") or "unknown"), str(run.get("message") or "")
    summary = _dict(run.get("diagnosis")).get("summary")
    detail = "\n".join(
        [f"{status}: {message}", f"failed nodes: {', '.join(str(n) for n in _list(run.get('failed_nodes')))}"]
        + ([f"diagnosis: {summary}"] if summary else [])
    )
    if status == "COMPLETED":
        cases = [case("aorta.run", "status")]
    elif status == "STOPPED":
        cases = [case("aorta.run", "status", "skipped", f"stopped by the user: {message}".rstrip(": "))]
    else:
        said = message if message.startswith(status) else f"{status}: {message}".rstrip(": ")
        cases = [case("aorta.run", "status", "failure", said, detail, status)]
    verdict = run.get("verdict")
    if isinstance(verdict, Mapping):
        reasons = [str(r) for r in _list(verdict.get("reasons"))]
        said = str(verdict.get("verdict"))
        if said == "PASS":
            cases.append(case("aorta.run", "verdict"))
        else:
            text = f"{said}: {'; '.join(reasons)}" if reasons else said
            cases.append(case("aorta.run", "verdict", "failure", text, "\n".join(reasons), said))
    return cases


def _no_report_why(run: Mapping[str, Any], facts: Mapping[str, Any]) -> str:
    if facts["not_launched"]:
        return "no report: " + facts["not_launched"]
    if facts["collection_error"]:
        return f"no report: collection stopped: {facts['collection_error']}"
    if run.get("combined_traces") is None:
        return "no report: no traces were collected"
    return "no report: the report was not made"


def _threshold_cases(report: Mapping[str, Any] | None, no_report: str) -> list[dict]:
    where = "aorta.thresholds"
    if report is None:
        return [case(where, "thresholds", "skipped", no_report)]
    if report.get("no_trace"):  # as the verdict says: nothing measured, nothing judged
        return [case(where, "thresholds", "skipped", f"thresholds not judged: {report['no_trace']}")]
    checks = [_dict(c) for c in _list(_dict(report.get("validation")).get("checks"))]
    if not checks:
        return [case(where, "thresholds", "skipped", "no threshold set (aorta_expected_results)")]
    cases = []
    for check in checks:
        name, reason = str(check.get("name")), str(check.get("reason") or "")
        if check.get("skipped"):
            cases.append(case(where, name, "skipped", reason or "not judged"))
        elif check.get("passed"):
            cases.append(case(where, name))
        else:
            detail = f"measured {check.get('value')}, threshold {check.get('threshold')}"
            cases.append(case(where, name, "failure", reason or f"{name}: not met", detail, "threshold"))
    return cases


def _listed(noun: str, items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{len(items)} {noun}: {'; '.join(items)}"


def _untested(report: Mapping[str, Any], node_test: bool) -> str:
    """The straggler test's verdict when it could not test (fewer than two ranks or nodes)."""
    test = _dict(report.get("straggler_test"))
    verdict = str(_dict(test.get("node_test")).get("verdict") if node_test else test.get("verdict") or "")
    return verdict if verdict.startswith("not tested") else ""


# How a failure's message counts more than one line of a kind, when its testcase name does not.
_COUNTED = {"slow_link": "slow links", "drift": "fields drift"}


def _finding_case(kind: str, texts: list[str], ignored: Collection[str], untested: str = "") -> dict:
    """One finding's testcase: failed naming each ``texts`` line, or skipped saying so when its kind
    is in the verdict's ``ignored`` (aorta_verdict_ignores), else skipped when the report could not
    test for it (``untested``), else passed."""
    where, name = "aorta.findings", KINDS[kind]
    listed = _listed(_COUNTED.get(kind, name), texts)
    if texts and kind in ignored:
        return case(where, name, "skipped", f"ignored (aorta_verdict_ignores): {listed}")
    if texts:
        return case(where, name, "failure", listed, "\n".join(texts), "finding")
    return case(where, name, "skipped", untested) if untested else case(where, name)


def _slow_link_untested(run: Mapping[str, Any]) -> str:
    """Why the fabric sweep could not name a link ('' when it could): it did not run, or could not
    localise a node, or run.json is of an earlier version (no ``fabric_sweep``)."""
    sweep = run.get("fabric_sweep")
    if not isinstance(sweep, Mapping):
        return "no fabric sweep in run.json (a run of an earlier version)"
    if not sweep.get("ran"):
        return f"fabric sweep not run: {sweep.get('why') or 'no reason recorded'}"
    if sweep.get("localisable") is False:
        return f"fabric sweep cannot name a node: {sweep.get('reason')}"
    return ""


def _baseline_untested(report: Mapping[str, Any]) -> str:
    baseline = report.get("baseline")
    if not isinstance(baseline, Mapping):
        return "no baseline given (aorta_baseline)"
    if baseline.get("verdict") == "not compared":
        return f"not compared: {baseline.get('reason') or ''}".rstrip(": ")
    return ""


def _finding_cases(run: Mapping[str, Any], report: Mapping[str, Any] | None, no_report: str) -> list[dict]:
    """``aorta.findings``: a testcase per kind of ``_findings`` (the lines the verdict judged), in its
    order; those of the report are skipped without one."""
    found = _findings.found(run, report)
    ignored = set(_list(_dict(run.get("verdict")).get("ignored")))
    untested = {"slow_link": _slow_link_untested(run)}
    if report is None:
        untested.update(slow_node=no_report, straggler=no_report, baseline_regression=no_report)
    else:
        untested.update(
            slow_node=_untested(report, True),
            straggler=_untested(report, False),
            baseline_regression=_baseline_untested(report),
        )
    cases = []
    for kind, texts in found.items():
        case = _finding_case(kind, texts, ignored, untested.get(kind, ""))
        if kind == "baseline_regression" and case["outcome"] == "failure":
            reason = str(_dict(_dict(report).get("baseline")).get("reason") or "")
            case["detail"] = "\n".join(filter(None, [texts[0], reason]))
        cases.append(case)
    return cases


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _suite_attributes(run: Mapping[str, Any], cases: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    attributes = {
        "name": f"aorta.cluster run {run.get('run_id')}",
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c["outcome"] == "failure")),
        "errors": "0",
        "skipped": str(sum(1 for c in cases if c["outcome"] == "skipped")),
    }
    started, finished = _seconds(run.get("started_epoch")), _seconds(run.get("finished_epoch"))
    if started is not None and finished is not None and finished >= started:
        attributes["time"] = f"{finished - started:.3f}"
    if started is not None:
        stamp = datetime.datetime.fromtimestamp(started, tz=datetime.timezone.utc)
        attributes["timestamp"] = stamp.isoformat(timespec="seconds")
    return attributes


def document_xml(run: Mapping[str, Any], cases: Sequence[Mapping[str, Any]]) -> str:
    """The XML text: the declaration, then ``<testsuites>`` with the run's one ``<testsuite>``."""
    attributes = _suite_attributes(run, cases)
    # <testsuites> has no skipped count in the JUnit schemas (tests/fixtures/junit/junit-10.xsd).
    top = {"name": "aorta.cluster"}
    top.update({key: attributes[key] for key in ("tests", "failures", "errors", "time") if key in attributes})
    root = ET.Element("testsuites", top)
    suite = ET.SubElement(root, "testsuite", {k: _clean(v) for k, v in attributes.items()})
    properties = ET.SubElement(suite, "properties")
    verdict = _dict(run.get("verdict")).get("verdict")
    for name, value in (("run_id", run.get("run_id")), ("status", run.get("status")), ("verdict", verdict)):
        if value is not None:
            ET.SubElement(properties, "property", {"name": name, "value": one_line(value)})
    for case in cases:
        element = ET.SubElement(
            suite, "testcase", {"classname": _clean(case["classname"]), "name": one_line(case["name"])}
        )
        if case["outcome"]:
            outcome = ET.SubElement(element, case["outcome"], {"message": one_line(case["message"])})
            if case["type"]:
                outcome.set("type", one_line(case["type"]))
            detail = _clean(case["detail"])
            outcome.text = detail if len(detail) <= DETAIL_CHARS else detail[: DETAIL_CHARS - 1] + _ELLIPSIS
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def junit_xml(run: Mapping[str, Any], report: Mapping[str, Any] | None) -> str:
    """The run (run.json's content) and its report (aorta_benchmark_report.json's, or None) as one
    JUnit XML document: the testcases the module's docstring lists."""
    facts = _facts(run)
    no_report = _no_report_why(run, facts)
    cases = [
        *_run_cases(run),
        *_node_cases(run, facts),
        *_threshold_cases(report, no_report),
        *_finding_cases(run, report, no_report),
    ]
    return document_xml(run, cases)
