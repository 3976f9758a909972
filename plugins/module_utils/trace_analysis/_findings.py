# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's findings: what names a node, a rank or a link as bad, each in one line of evidence.

Private to this collection; standard library only, beside the analysis (read on the controller).
One home: the verdict (``_verdict``) fails a run on each finding the user did not ignore
(``aorta_verdict_ignores``), junit.xml (controller) writes one testcase per kind from the same lines,
so the two cannot disagree about what was found.

The kinds, in the order junit.xml lists them (the name a user gives in ``aorta_verdict_ignores``,
then junit.xml's testcase name): ``slow_node`` (slow nodes), ``straggler`` (stragglers),
``slow_link`` (slow link), ``drift`` (drift), ``link_errors`` (link errors), ``baseline_regression``
(baseline). Each is already bounded against noise where it is measured: the straggler tests at 5%
(binomial, Bonferroni), the fabric sweep against the rounds' median, link errors from
``aorta_link_errors_min`` up, the baseline beyond its tolerance and the run's own noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import slow_link_evidence

# kind -> junit.xml's testcase name under aorta.findings
KINDS = {
    "slow_node": "slow nodes",
    "straggler": "stragglers",
    "slow_link": "slow link",
    "drift": "drift",
    "link_errors": "link errors",
    "baseline_regression": "baseline",
}
# kind -> the word before its first line in the verdict's reason (the baseline's line says itself)
REASON = {
    "slow_node": "slow node",
    "straggler": "straggler",
    "slow_link": "slow link",
    "drift": "drift",
    "link_errors": "link errors",
    "baseline_regression": "",
}


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def percent(ratio: Any) -> str:
    """``0.52`` as ``+52%``; ``?`` when not a number."""
    return f"{float(ratio) * 100:+.0f}%" if isinstance(ratio, (int, float)) else "?"


def slow_nodes(report: Mapping[str, Any]) -> list[str]:
    return [
        f"node {n.get('node')}: compute {percent(n.get('excess_ratio'))} over the median node "
        f"(ranks {','.join(str(r) for r in _list(n.get('ranks')))}; slowest in {n.get('slowest_steps')} "
        f"of {n.get('steps')} steps)"
        for n in (_dict(n) for n in _list(report.get("slow_nodes")))
    ]


def stragglers(report: Mapping[str, Any]) -> list[str]:
    return [
        f"rank {s.get('rank')} on node {s.get('node')}: compute {percent(s.get('excess_ratio'))} over the "
        f"median rank (slowest in {s.get('slowest_steps')} of {s.get('steps')} steps)"
        for s in (_dict(s) for s in _list(report.get("stragglers")))
    ]


def slow_links(record: Mapping[str, Any], report: Mapping[str, Any] | None) -> list[str]:
    """The nodes the fabric sweep named slow (run.json's ``fabric_sweep.slow``), with the report's
    collective figures when there is a report (its ``slow_links``)."""
    sweep = _dict(record.get("fabric_sweep"))
    if not sweep.get("ran"):
        return []
    links = _list((report or {}).get("slow_links")) or _list(sweep.get("slow"))
    return [slow_link_evidence(dict(_dict(link))) for link in links]


def drift(record: Mapping[str, Any]) -> list[str]:
    """The fingerprint fields on which nodes differ (run.json's ``drift``)."""
    texts = []
    for item in (_dict(d) for d in _list(record.get("drift"))):
        named = ", ".join(f"{pair[0]} ({pair[1]})" for pair in _list(item.get("nodes")) if len(_list(pair)) == 2)
        against = f"differ from {item['majority']}" if item.get("majority") is not None else "differ, no majority"
        label = item.get("label") or item.get("field")
        texts.append(f"{label}: {item.get('count')} of {item.get('of')} nodes {against}: {named}")
    return texts


def link_errors(record: Mapping[str, Any]) -> list[str]:
    """The nodes whose fabric link's error counters grew by ``aorta_link_errors_min`` or more during
    the run (run.json's ``link_errors``)."""
    texts = []
    for item in (_dict(i) for i in _list(record.get("link_errors"))):
        grew = ", ".join(f"{k} +{v}" for k, v in _dict(item.get("grew")).items())
        texts.append(f"{item.get('node')} ({item.get('interface')}): {grew}")
    return texts


def baseline_regression(report: Mapping[str, Any] | None) -> list[str]:
    """A regression of the step time beyond the tolerance and the noise, with who stands out."""
    baseline = _dict((report or {}).get("baseline"))
    if baseline.get("verdict") != "regression":
        return []
    step = _dict(_dict(baseline.get("metrics")).get("avg_step_time_ms"))
    now, then = step.get("now"), step.get("then")
    figure = (
        f"avg step time {now:.4g} ms against {then:.4g} ms ({percent(step.get('delta_ratio'))})"
        if isinstance(now, (int, float)) and isinstance(then, (int, float))
        else "avg step time longer"
    )
    tolerance = baseline.get("tolerance")
    beyond = f", beyond the {float(tolerance) * 100:g}% tolerance" if isinstance(tolerance, (int, float)) else ""
    who = f"; {baseline['stands_out']}" if baseline.get("stands_out") else ""
    return [f"regression against the baseline: {figure}{beyond}{who}"]


def kinds_of(value: Any) -> list[str]:
    """``aorta_verdict_ignores`` as the kinds it names: a list, or text (``-e
    aorta_verdict_ignores=slow_link``, an AWX survey's answer) split at commas and white space.
    Raises ValueError naming what is not a kind: a kind misspelt would leave its finding failing
    the verdict with nobody told why."""
    if value is None:
        return []
    if isinstance(value, str):
        items = [item for item in value.replace(",", " ").split() if item]
    elif isinstance(value, (list, tuple)):
        items = [str(item).strip() for item in value]
    else:
        raise ValueError(f"aorta_verdict_ignores: {value!r} is not a list of finding kinds ({', '.join(KINDS)})")
    unknown = [item for item in items if item not in KINDS]
    if unknown:
        raise ValueError(
            f"aorta_verdict_ignores: {', '.join(unknown)} names no finding kind (the kinds: {', '.join(KINDS)})"
        )
    return items


def found(record: Mapping[str, Any] | None, report: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Every kind (``KINDS``' order) with its lines, empty where nothing was found. ``record`` is
    run.json (None for a folder of traces with no run record), ``report`` the report (None when
    none was made: the kinds it holds are then empty)."""
    record = record or {}
    return {
        "slow_node": slow_nodes(report) if report else [],
        "straggler": stragglers(report) if report else [],
        "slow_link": slow_links(record, report),
        "drift": drift(record),
        "link_errors": link_errors(record),
        "baseline_regression": baseline_regression(report),
    }


def reason(kind: str, texts: list[str]) -> str:
    """One finding as one of the verdict's reasons: its word, its first line, how many more."""
    more = f" (+{len(texts) - 1} more)" if len(texts) > 1 else ""
    word = REASON[kind]
    return (f"{word}: {texts[0]}" if word else texts[0]) + more
