# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's one verdict, PASS or FAIL, and its reasons: the same words in run.json, the report's
first row, the console's last line, junit.xml and the AWX stats.

Private to this collection; standard library only. The report (on the controller or a node) and the
controller's record both call ``verdict``, so the two can never say different things.

A run passes when it COMPLETED and every CVS threshold that was judged holds, as in CVS, where a
threshold not met fails the test. Findings (a slow node, a straggler, drift, a baseline regression)
are shown beside the verdict and never change it: they are evidence to act on, not a gate.
"""

from __future__ import annotations

COMPLETED = "COMPLETED"


def verdict(status: str | None, message: str | None, checks: list | None, report_made: bool) -> dict:
    """``{"verdict": "PASS"|"FAIL", "reasons": [...], "notes": [...]}``.

    ``status`` and ``message`` are run.json's (None for a folder of traces with no run record: the
    thresholds alone are judged); ``checks`` the report's ``validation.checks``; ``report_made``
    whether any trace was analysed (without one, the thresholds could not be judged: a note, not a
    reason, since the run's status already says why nothing was profiled)."""
    reasons = []
    if status is not None and status != COMPLETED:
        said = str(message or "")
        reasons.append(said if said.startswith(str(status)) else f"{status}: {said}".rstrip(": "))
    failed = [check for check in (checks or ()) if report_made and not check.get("passed")]
    reasons += [f"threshold {check.get('reason')}" for check in failed]
    notes = []
    if not report_made:
        notes.append("thresholds not judged: no trace was analysed")
    elif checks:
        notes.append(f"{len(checks) - len(failed)} of {len(checks)} thresholds met")
    else:
        notes.append("no threshold set")
    if status is None:
        notes.append("no run record: the thresholds alone were judged")
    return {"verdict": "FAIL" if reasons else "PASS", "reasons": reasons, "notes": notes}


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
