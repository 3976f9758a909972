# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's one verdict, PASS or FAIL, and its reasons: the same words in run.json, the report's
first row, the console's last line, junit.xml and the AWX stats.

Private to this collection; standard library only, beside the analysis it judges (read on the
controller). The report and the run's record (run_outcome) both call ``verdict``, so the two can
never say different things.

A run passes when it COMPLETED, every CVS threshold that was judged holds (as in CVS, where a
threshold not met fails the test) and nothing was found (``_findings``: a slow node or rank, a slow
link, drift, link errors, a regression against the baseline): a validation run that found a bad link
has not passed. A finding kind the user lists in ``aorta_verdict_ignores`` is kept as a note
instead ("... ignored"), and junit.xml skips its testcase saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import KINDS, reason

COMPLETED = "COMPLETED"
THRESHOLD = "threshold "  # how a threshold's reason starts (what aorta_fail_on_threshold may let pass)


def verdict(
    status: str | None,
    message: str | None,
    checks: list | None,
    report_made: bool,
    findings: Mapping[str, list] | None = None,
    ignores: Iterable[str] = (),
) -> dict:
    """``{"verdict": "PASS"|"FAIL", "reasons": [...], "notes": [...], "findings": [kind, ...],
    "ignored": [kind, ...]}``.

    ``status`` and ``message`` are run.json's (None for a folder of traces with no run record: the
    thresholds alone are judged); ``checks`` the report's ``validation.checks``; ``report_made``
    whether any trace was analysed (without one, the thresholds could not be judged: a note, not a
    reason, since the run's status already says why nothing was profiled); ``findings``
    ``_findings.found``'s lines per kind; ``ignores`` the kinds that stay notes."""
    reasons = []
    if status is not None and status != COMPLETED:
        said = str(message or "")
        reasons.append(said if said.startswith(str(status)) else f"{status}: {said}".rstrip(": "))
    failed = [check for check in (checks or ()) if report_made and not check.get("passed")]
    reasons += [f"{THRESHOLD}{check.get('reason')}" for check in failed]
    ignored = set(ignores)
    given = findings or {}
    found = {kind: list(given[kind]) for kind in KINDS if given.get(kind)}
    failing = [kind for kind in found if kind not in ignored]
    reasons += [reason(kind, found[kind]) for kind in failing]
    notes = []
    if not report_made:
        notes.append("thresholds not judged: no trace was analysed")
    elif checks:
        notes.append(f"{len(checks) - len(failed)} of {len(checks)} thresholds met")
    else:
        notes.append("no threshold set")
    notes += [f"{reason(kind, found[kind])}: ignored (aorta_verdict_ignores)" for kind in found if kind in ignored]
    if status is None:
        notes.append("no run record: the thresholds and the traces' findings alone were judged")
    return {
        "verdict": "FAIL" if reasons else "PASS",
        "reasons": reasons,
        "notes": notes,
        "findings": failing,
        "ignored": [kind for kind in found if kind in ignored],
    }


def fails_exit(found: Mapping, fail_on_threshold: bool) -> bool:
    """Whether the verdict ``found`` makes the play (or trace_report's task) exit non-zero: a run
    that did not complete and a finding not ignored always; a threshold not met unless
    ``aorta_fail_on_threshold`` is false (CVS fails the test; false keeps the old exit 0)."""
    if found.get("verdict") == "PASS":
        return False
    # A status or a finding is never a threshold's reason (those start with THRESHOLD).
    gated = [str(r) for r in found.get("reasons") or () if not str(r).startswith(THRESHOLD)]
    return bool(gated) or bool(fail_on_threshold)


def verdict_line(found: dict, limit: int = 300) -> str:
    """The console's last line: ``verdict PASS: 4 of 4 thresholds met`` or ``verdict FAIL: <first
    reason> (+N more)``, under ``limit`` characters (the rest is in run.json)."""
    reasons = found.get("reasons") or []
    if reasons:
        more = f" (+{len(reasons) - 1} more in run.json)" if len(reasons) > 1 else ""
        text = f"verdict FAIL: {reasons[0]}"
        if len(text) + len(more) > limit:
            text = text[: max(limit - len(more) - 1, 0)] + "…"
        return text + more
    notes = "; ".join(found.get("notes") or ())
    line = f"verdict {found.get('verdict')}" + (f": {notes}" if notes else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"
