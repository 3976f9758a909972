# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a run's report is judged by (controller side): the CVS thresholds merged over their
defaults, and the baseline, found by itself (``aorta_baseline: auto``) or named.

Private to this collection; aorta.cluster.trace_parse's action calls both before the report is made.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history

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
        differences = _history.differences(_history.fingerprint(run, keys), _history.fingerprint(then, keys))
        return {"baseline_context": {"chosen": "named by aorta_baseline", "differences": differences}}
    if run is None:
        reason = "no comparable run: aorta_baseline=auto needs the run's own run.json (a folder of traces has none)"
        return {"baseline": None, "baseline_context": {"reason": reason}}
    root = os.path.dirname(os.path.abspath(run_dir.rstrip("/")))
    path, reason = _history.choose_baseline(root, run, keys)
    if path is None:
        return {"baseline": None, "baseline_context": {"reason": reason}}
    return {"baseline": path, "baseline_context": {"chosen": reason, "differences": []}}
