# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run against an earlier one: the headline figures then and now, and a verdict beyond noise.

Private to this collection; standard library only.
"""

from __future__ import annotations

import json
import math
import os
import statistics

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import (
    excess_compute,
    slow_node_text,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import ReportError

# The headline figures shown against a baseline; only the step time is judged (the ratios of a few
# profiled steps move with the machine's load and have no spread to judge them by).
BASELINE_METRICS = ("avg_step_time_ms", "avg_iteration_time_ms", "avg_compute_ratio", "avg_overlap_ratio")
# The step time's relative change within which a run is the same as its baseline (the module's
# default; the vocabulary's aorta_baseline_tolerance is the same, checked by a test).
TOLERANCE = 0.05


def _step_noise_ms(report: dict) -> float | None:
    """Standard error of the mean iteration time, from the ranks' step-to-step spread."""
    spreads = [
        (r["iterations"]["std"], r["iterations"]["count"])
        for r in report.get("per_rank_summary") or []
        if (r.get("iterations") or {}).get("count", 0) > 1 and r["iterations"].get("std") is not None
    ]
    if not spreads:
        return None
    std = statistics.fmean(sd for sd, _n in spreads)
    count = min(n for _sd, n in spreads)
    return std / math.sqrt(count)


def compare_baseline(report: dict, source: str, tolerance: float = TOLERANCE) -> dict:
    """``baseline``: the headline figures now and then with their relative change, and the verdict
    on the step time (``avg_step_time_ms``): ``regression`` when it is longer by more than ``tolerance`` and by more
    than twice the noise of the two means (their steps' spread), ``improvement`` the other way,
    ``within noise`` when beyond the tolerance but not the noise, else ``same``. ``source`` is an
    earlier results directory or its report."""
    if not 0 <= float(tolerance) < 1:
        raise ReportError(f"aorta_baseline_tolerance: {tolerance!r} must be from 0 to below 1")
    path = os.path.join(source, "aorta_benchmark_report.json") if os.path.isdir(source) else source
    try:
        with open(path) as handle:
            earlier = json.load(handle)
        then = earlier["performance"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"aorta_baseline: {source}: not a report this collection wrote ({exc})") from None
    now = report["performance"]
    metrics = {}
    for name in BASELINE_METRICS:
        a, b = now.get(name), then.get(name)
        delta = None if a is None or b is None or not b else (a - b) / abs(b)
        metrics[name] = {"now": a, "then": b, "delta_ratio": delta, "judged": name == "avg_step_time_ms"}
    a, b = now.get("avg_step_time_ms"), then.get("avg_step_time_ms")
    noise_now, noise_then = _step_noise_ms(report), _step_noise_ms(earlier)
    noise = 2 * math.sqrt(noise_now**2 + noise_then**2) if noise_now is not None and noise_then is not None else None
    verdict, reason = "same", ""
    if a is None or b is None or not b:
        verdict, reason = "not compared", "no step time in one of the reports (an earlier version's report?)"
    else:
        delta = (a - b) / b
        beyond_noise = noise is not None and abs(a - b) > noise
        if abs(delta) > tolerance and beyond_noise:
            verdict = "regression" if delta > 0 else "improvement"
        elif abs(delta) > tolerance:
            verdict = "within noise"
            reason = (
                f"a change of {delta * 100:+.1f}% is within the steps' noise (2 sigma = {noise:.3g} ms)"
                if noise is not None
                else "too few profiled steps to tell a change from noise"
            )
    return {
        "source": path,
        "tolerance": tolerance,
        "noise_ms": noise,
        "metrics": metrics,
        "verdict": verdict,
        "reason": reason,
    }


# How many of the named nodes or ranks a regression's line carries (the report's tables list all).
STANDS_OUT_SHOWN = 3
NOBODY_STANDS_OUT = "no node or rank stands out: the whole cluster is slower"


def stands_out(report: dict) -> str:
    """Who a regression points at, in one line: the slow nodes (``slow node <node> (+N% compute)``),
    else the stragglers (``rank <r> on <node> (+N% compute)``), at most ``STANDS_OUT_SHOWN`` and then
    a count; when the run names neither, ``NOBODY_STANDS_OUT``, or why it could not tell (the
    straggler test's verdict, when it did not test)."""
    nodes = [n for n in report.get("slow_nodes") or [] if isinstance(n, dict)]
    ranks = [r for r in report.get("stragglers") or [] if isinstance(r, dict)]
    named = [slow_node_text(n) for n in nodes] or [
        f"rank {r.get('rank')} on {r.get('node')}{excess_compute(r)}" for r in ranks
    ]
    if not named:
        untested = str((report.get("straggler_test") or {}).get("verdict") or "")
        if untested.startswith("not tested"):
            return f"no node or rank named (the straggler test: {untested})"
        return NOBODY_STANDS_OUT
    more = f" and {len(named) - STANDS_OUT_SHOWN} more" if len(named) > STANDS_OUT_SHOWN else ""
    return "stands out: " + ", ".join(named[:STANDS_OUT_SHOWN]) + more
