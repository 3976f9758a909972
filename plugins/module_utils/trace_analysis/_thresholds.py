# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""CVS's expected_results: the threshold names, the values each may take, and the checks.

Private to this collection; standard library and ansible's own validation only.
"""

from __future__ import annotations

import contextlib
import math

from ansible.module_utils.common.validation import check_type_dict

THRESHOLDS = ("max_avg_iteration_ms", "min_compute_ratio", "min_overlap_ratio", "max_time_variance_ratio")

# What each threshold may be, as CVS accepts them: (low, high, whether low itself is allowed).
# max_avg_iteration_ms: 0 is accepted and judged, as CVS's schema (ge=0) and loader (>= 0) do.
THRESHOLD_RANGES = {
    "max_avg_iteration_ms": (0.0, math.inf, True),
    "min_compute_ratio": (0.0, 1.0, True),
    "min_overlap_ratio": (0.0, 1.0, True),
    "max_time_variance_ratio": (0.0, math.inf, True),
}


class ReportError(Exception):
    """Bad input to the report (unknown threshold, no such directory); the message names it."""


def _threshold_limit(name, raw):
    """A threshold as a number; text (an AWX survey answer, ``k=v`` words) is converted, and an empty
    answer means the check is not wanted."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    value = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str):
        with contextlib.suppress(ValueError):
            value = float(raw)
    if value is None:
        raise ReportError(f"aorta_expected_results: {name}: {raw!r} is not a number")
    low, high, low_ok = THRESHOLD_RANGES.get(name, (-math.inf, math.inf, True))
    if not math.isfinite(value) or value > high or value < low or (value == low and not low_ok):
        where = f"from {low:g}" if low_ok else f"above {low:g}"
        upto = f" to {high:g}" if math.isfinite(high) else ""
        raise ReportError(f"aorta_expected_results: {name}: {raw!r} must be a number {where}{upto}")
    return value


def threshold_problems(expected) -> list:
    """Each bad threshold of ``expected`` as one line naming it (for checks before the launch)."""
    if expected in (None, ""):
        return []
    if isinstance(expected, str):  # an AWX survey answer: JSON or k=v words, as the task reads it
        try:
            expected = check_type_dict(expected)
        except (TypeError, ValueError) as exc:
            return [f"aorta_expected_results: {expected!r} is not a mapping ({exc})"]
    if not isinstance(expected, dict):
        return ["aorta_expected_results: must be a mapping of threshold names to numbers"]
    problems = []
    unknown = sorted(set(expected) - set(THRESHOLDS))
    if unknown:
        problems.append(
            f"aorta_expected_results: unknown threshold {', '.join(unknown)}; known: {', '.join(THRESHOLDS)}"
        )
    for name in THRESHOLDS:
        try:
            _threshold_limit(name, expected.get(name))
        except ReportError as exc:
            problems.append(str(exc))
    return problems


def check_thresholds(performance: dict, expected: dict) -> list:
    """CVS's expected_results, each with pass/fail and the reason."""
    unknown = sorted(set(expected) - set(THRESHOLDS))
    if unknown:
        raise ReportError(
            f"aorta_expected_results: unknown threshold {', '.join(unknown)}; known: {', '.join(THRESHOLDS)}"
        )
    checks = []
    avg_ms = performance.get("avg_iteration_time_ms")
    values = {
        "max_avg_iteration_ms": avg_ms,
        "min_compute_ratio": performance.get("avg_compute_ratio"),
        "min_overlap_ratio": performance.get("avg_overlap_ratio"),
        "max_time_variance_ratio": (performance["std_iteration_time_us"] / (avg_ms * 1000.0))
        if avg_ms and performance.get("std_iteration_time_us") is not None
        else None,
    }
    for name in THRESHOLDS:
        limit = _threshold_limit(name, expected.get(name))
        if limit is None:
            continue
        value = values[name]
        if name == "max_time_variance_ratio" and avg_ms == 0:
            # CVS's gate judges the variance only when the average time is above 0: a ratio to 0 is
            # undefined, so the check is skipped there, and here too (and said), not failed.
            checks.append(
                {
                    "name": name,
                    "threshold": limit,
                    "value": None,
                    "passed": True,
                    "skipped": True,
                    "reason": f"{name}: not judged: the average iteration time is 0 ms (CVS skips it too)",
                }
            )
            continue
        if value is None:
            checks.append(
                {
                    "name": name,
                    "threshold": limit,
                    "value": None,
                    "passed": False,
                    "reason": f"{name}: no value could be measured",
                }
            )
            continue
        passed = value <= limit if name.startswith("max_") else value >= limit
        relation = ("exceeds" if name.startswith("max_") else "is below") if not passed else "within"
        checks.append(
            {
                "name": name,
                "threshold": limit,
                "value": value,
                "passed": passed,
                "reason": f"{name}: measured {value:.6g} {relation} threshold {limit}",
            }
        )
    return checks
