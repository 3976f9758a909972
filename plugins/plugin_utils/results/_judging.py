# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a run's report is judged by (controller side): the CVS thresholds merged over their
defaults, and the baseline: the one home of its choice (``aorta_baseline: auto``: the newest
comparable run of the history) or a named one with how its fingerprint differs. The comparison
itself is module_utils' trace_analysis/_baseline.

Private to this collection; aorta.cluster.trace_parse's action calls both before the report is made.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import plural, utc
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import THRESHOLD
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._fingerprint import (
    differences,
    fingerprint,
    fingerprint_id,
    refine,
)

AUTO = "auto"


def thresholds(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``aorta_expected_results`` merged over its defaults (CVS's) key by key: one key given changes
    one threshold and keeps the others (a dict given on the command line replaces the whole default
    in Ansible); a key given as null or empty turns that check off; an unknown key stays, for the
    report to refuse by name."""
    merged = dict(DEFAULTS["aorta_expected_results"])
    for name, value in (given or {}).items():
        merged[name] = None if isinstance(value, str) and not value.strip() else value
    return merged


def _run_of(path: str) -> dict[str, Any] | None:
    """The run.json of a results directory, or of the directory holding a given report file."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    return read_json_object(os.path.join(folder, "run.json"))


def run_dir_of(report_dir: str, traces_dir: str) -> str:
    """The run a report of a folder of traces (trace_report.yml) belongs to, for its baseline: the
    report's folder when it holds a run.json, else the folder that holds the traces' folder when
    that does (a run's combined_traces), else the report's folder (which then has none)."""
    if report_dir and os.path.isfile(os.path.join(report_dir, "run.json")):
        return report_dir
    parent = os.path.dirname(os.path.abspath(traces_dir)) if traces_dir else ""
    if parent and os.path.isfile(os.path.join(parent, "run.json")):
        return parent
    return report_dir


def baseline(given: Any, run_dir: str, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """The trace_parse options for ``aorta_baseline``: ``baseline`` (the run to compare with, None
    when none) and ``baseline_context`` (why it was chosen, why none was, or how a named one's
    fingerprint differs). Nothing when no baseline was asked for."""
    name = str(given or "").strip()
    if not name:
        return {}
    run = _run_of(run_dir) if run_dir else None
    keys = tuple(ignore)
    if name != AUTO:
        then = _run_of(name)
        if run is None or then is None:
            return {}
        differ = differences(fingerprint(run, keys), fingerprint(then, keys))
        return {"baseline_context": {"chosen": "named by aorta_baseline", "differences": differ}}
    if run is None:
        reason = "no comparable run: aorta_baseline=auto needs the run's own run.json (a folder of traces has none)"
        return {"baseline": None, "baseline_context": {"reason": reason}}
    root = os.path.dirname(os.path.abspath(run_dir.rstrip("/")))
    path, reason = choose_baseline(root, run, keys)
    if path is None:
        return {"baseline": None, "baseline_context": {"reason": reason}}
    return {"baseline": path, "baseline_context": {"chosen": reason, "differences": []}}


def choose_baseline(root: str, run: Mapping[str, Any], ignore: Iterable[str] = ()) -> tuple[str | None, str]:
    """``aorta_baseline: auto``: the newest run under ``root`` (by ``started_epoch``, from index.json
    when there is one, else from every run directory) that started no later than ``run`` (run.json),
    is not ``run``, is COMPLETED with nothing found (``_found_something``), has an
    aorta_benchmark_report.json and has ``run``'s fingerprint.
    Returns (that run's directory, why) or (None, ``no comparable run: ...``, naming what differs
    in the newest earlier COMPLETED run when there is one)."""
    patterns = tuple(ignore)
    fp = fingerprint(run, patterns)
    wanted = fingerprint_id(fp)
    rows = _history.indexed_rows(root, patterns)
    this_id, started = str(run.get("run_id") or ""), _number(run.get("started_epoch"))
    earlier = [
        r
        for r in rows
        if str(r.get("run_id")) != this_id
        and (started is None or _number(r.get("started_epoch")) is None or r["started_epoch"] <= started)
    ]
    if not earlier:
        return None, f"no comparable run: no earlier run under {root}"
    prints = [refine(r.get("fingerprint") or {}, patterns) for r in earlier]
    same = [r for r, p in zip(earlier, prints) if fingerprint_id(p) == wanted]
    for row in same:
        path = os.path.join(root, str(row["dir"]))
        if (
            row.get("status") == "COMPLETED"
            and not _found_something(row)
            and os.path.isfile(os.path.join(path, _history.REPORT_JSON))
        ):
            when = utc(row["started_epoch"], "start unknown")
            return path, f"newest COMPLETED run with the same fingerprint {wanted}: {row['run_id']} ({when})"
    count = plural(len(earlier), "earlier run")
    if same:
        why = f"{count}, {len(same)} with this fingerprint {wanted}, none COMPLETED with a report"
    else:
        why = f"{count}, none with this fingerprint {wanted}"
    other = next(
        ((r, p) for r, p in zip(earlier, prints) if r.get("status") == "COMPLETED" and fingerprint_id(p) != wanted),
        None,
    )
    if other is not None:
        why += f"; the newest COMPLETED one, {other[0]['run_id']}, differs in: " + "; ".join(differences(fp, other[1]))
    return None, f"no comparable run: {why}"


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _found_something(row: Mapping[str, Any]) -> bool:
    """Whether a COMPLETED run's verdict failed on a finding (a regression, a slow node or link),
    not on thresholds alone: such a run is no standard to hold the next to (a regression would
    otherwise become the next run's baseline). The history row keeps the verdict's reasons; those
    of a COMPLETED run that are not a threshold's are its findings."""
    verdict = row.get("verdict") or {}
    reasons = [str(r) for r in verdict.get("reasons") or ()]
    return verdict.get("verdict") == "FAIL" and any(not r.startswith(THRESHOLD) for r in reasons)
