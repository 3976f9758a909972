# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's end, written where people and CI look (controller side): the verdict in run.json,
junit.xml beside it and the run's row in the results root's history (index.json, index.html).

Private to this collection. aorta.cluster.run_outcome calls ``finish`` once per run, last, whatever
the outcome (a setup failure too), after run.json and, when traces were analysed, the report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _findings
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._verdict import (
    THRESHOLD,
    fails_exit,
    verdict,
    verdict_line,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object, write_text_atomic
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history, _junit

REPORT = "aorta_benchmark_report.json"


class OutcomeError(Exception):
    """No run.json to finish, or one that cannot be written; the message names the file."""


def of_run(report: Mapping[str, Any] | None, run_id: Any) -> Mapping[str, Any] | None:
    """``report`` when it is this run's, None when none was made (or the one there is another
    run's: a results directory given by hand may be reused)."""
    if report is None:
        return None
    return report if (report.get("run") or {}).get("run_id") in (None, run_id) else None


def judge(run: Mapping[str, Any], report: Mapping[str, Any] | None, ignores: Iterable[str] = ()) -> dict[str, Any]:
    """The verdict of ``run`` (run.json) with its ``report``: the report's own when it has one (it
    was judged from the same run.json, with the same ``aorta_verdict_ignores``), else from the run's
    status and run.json's own findings (the fabric sweep, drift, link errors)."""
    if report is not None and isinstance(report.get("verdict"), dict):
        return dict(report["verdict"])
    checks = ((report or {}).get("validation") or {}).get("checks")
    found = _findings.found(run, report)
    return verdict(run.get("status"), run.get("message"), checks, report is not None, found, ignores)


def finish(
    results_dir: str, ignore: Iterable[str] = (), write: bool = True, verdict_ignores: Iterable[str] = ()
) -> dict[str, Any]:
    """Judge the run in ``results_dir`` and write its verdict into run.json, junit.xml beside it and
    its row into the history of the parent directory (the results root). ``ignore`` is
    ``aorta_baseline_ignore`` (the history's fingerprint), ``verdict_ignores`` the finding kinds that
    do not fail the verdict. Returns the verdict, its line, the paths written and whether the run
    passed; ``write=False`` (check mode) writes none."""
    run_json = os.path.join(results_dir, "run.json")
    run = read_json_object(run_json)
    if run is None:
        raise OutcomeError(f"{run_json}: no run.json to judge (run_record writes it first)")
    # Read once: the verdict, junit.xml and the history's row all come from these two.
    written = read_json_object(os.path.join(results_dir, REPORT))
    report = of_run(written, run.get("run_id"))
    found = judge(run, report, tuple(verdict_ignores))
    run["verdict"] = found
    paths = {"run_json": run_json, "junit": os.path.join(results_dir, "junit.xml")}
    if write:
        text = json.dumps(run, indent=4, sort_keys=True, separators=(",", ": "))
        try:
            write_text_atomic(run_json, text, 0o644)
            write_text_atomic(paths["junit"], _junit.junit_xml(run, report), 0o644)
        except OSError as exc:
            raise OutcomeError(f"{exc.filename}: cannot write: {exc.strerror}") from None
        root = os.path.dirname(os.path.abspath(results_dir.rstrip("/")))
        try:
            history = _history.update(root, results_dir, tuple(ignore), run=run, report=written)
            paths.update(index_html=history["index_html"], index_json=history["index_json"])
        except OSError as exc:
            # The run's own record is written; a history that cannot be updated is said, not fatal.
            paths["history_error"] = f"{root}: history not updated: {exc.strerror or exc}"
    return {
        "verdict": found["verdict"],
        "reasons": found["reasons"],
        "notes": found["notes"],
        "line": verdict_line(found),
        "status": run.get("status"),
        "thresholds_failed": any(reason.startswith(THRESHOLD) for reason in found["reasons"]),
        "findings": list(found.get("findings") or ()),
        "ignored": list(found.get("ignored") or ()),
        **paths,
    }


def fails_play(found: Mapping[str, Any], fail_on_threshold: bool) -> bool:
    """Whether the play must exit non-zero (``_verdict.fails_exit``: the one rule)."""
    return fails_exit(found, fail_on_threshold)


def awx_stats(found: Mapping[str, Any]) -> dict[str, Any]:
    """set_stats' data: the verdict, its reasons and where junit.xml and the history are."""
    data = {
        "aorta_verdict": found["verdict"],
        "aorta_verdict_reasons": list(found["reasons"]),
        "aorta_junit": found.get("junit", ""),
        "aorta_history": found.get("index_html", ""),
    }
    return {"data": data, "per_host": False, "aggregate": True}
