# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which ranks hold the others back: a per-step and per-collective test with a stated significance.

Private to this collection; standard library only.
"""

from __future__ import annotations

import math
import statistics

STRAGGLER_ALPHA = 0.05  # family-wise: the chance that noise alone names some rank


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _slowest_counts(table: list, ranks: set, higher_is_slower: bool, margin: float) -> dict:
    """Per rank of ``ranks``, in how many rows of ``table`` ({rank: value}) it is alone at the slow end
    among ``ranks`` and, with ``margin``, beyond the whole row's median by more than that ratio."""
    counts: dict = {}
    for row in table:
        values = {r: v for r, v in row.items() if r in ranks}
        if len(values) < 2:
            continue
        worst = (max if higher_is_slower else min)(values.values())
        if list(values.values()).count(worst) != 1:
            continue  # a tie names nobody
        median = statistics.median(row.values())
        if margin and (median <= 0 or worst / median <= 1 + margin):
            continue
        rank = next(r for r, v in values.items() if v == worst)
        counts[rank] = counts.get(rank, 0) + 1
    return counts


def _p_value(count: int, trials: int, candidates: int) -> float:
    """Bonferroni over the candidates: the chance noise makes any of them alone-slowest ``count`` times."""
    if not trials or candidates < 2:
        return 1.0
    return min(1.0, candidates * _binomial_tail(count, trials, 1 / candidates))


def stragglers(ranks: list, threshold: float, evidence: dict | None = None, alpha: float = STRAGGLER_ALPHA) -> tuple:
    """Ranks that hold the others back, most certain first; nodes slow as a whole; the test's record.

    Per profiled step (same step number on every rank), the rank alone the slowest, by more than
    ``threshold`` over the step's median compute, scores one; per collective (same order on every
    rank), the rank that waits least arrived last and scores one. Under noise alone each of N ranks
    is the slowest with chance 1/N, so k of n is a binomial tail, Bonferroni-corrected over the N
    ranks: noise names somebody with chance below ``alpha``. A rank is named when either count is
    that unlikely and its median compute exceeds the others' by more than ``threshold``; then the
    test repeats without it (step-down), so several stragglers are found one by one.
    """
    evidence = evidence or {}
    by_rank = {r["rank"]: r for r in ranks}
    steps = {}
    for rank, item in evidence.items():
        if rank in by_rank and item.get("step_compute_ms"):
            steps[rank] = {int(k): v for k, v in item["step_compute_ms"]}
    test: dict = {"alpha": alpha, "threshold": threshold, "ranks": len(steps), "steps": 0, "collectives": 0}
    if len(steps) < 2:
        test["verdict"] = "not tested: fewer than two ranks with profiled steps"
        return [], [], test
    count = len(steps)
    common = sorted(set.intersection(*(set(v) for v in steps.values())))
    table = [{r: steps[r][k] for r in steps} for k in common]
    # A step that barely ran (the profiler's closing step) is no evidence.
    typical = statistics.median(statistics.median(row.values()) for row in table) if table else 0.0
    table = [row for row in table if typical > 0 and statistics.median(row.values()) >= 0.05 * typical]
    waits = {r: (evidence[r].get("collective_ms") or []) for r in steps}
    n_coll = min(len(w) for w in waits.values())
    arrivals = [{r: waits[r][i] for r in steps} for i in range(n_coll)]
    need = next((n for n in range(1, 64) if count * (1 / count) ** n < alpha), None)
    test.update(steps=len(table), collectives=n_coll, steps_needed=need)
    excess = {}
    for rank in steps:
        ratios = [row[rank] / statistics.median(row.values()) for row in table if statistics.median(row.values()) > 0]
        excess[rank] = statistics.median(ratios) - 1.0 if ratios else 0.0
    compute_median = statistics.median(r.get("compute_per_iteration_ms") or 0 for r in ranks)
    wait_median = statistics.median(r.get("comm_wait_per_iteration_ms") or 0 for r in ranks)
    slow, remaining = [], set(steps)
    while len(remaining) >= 2:
        slow_steps = _slowest_counts(table, remaining, True, threshold)
        last = _slowest_counts(arrivals, remaining, False, 0.0)
        candidates = []
        for rank in remaining:
            p_steps = _p_value(slow_steps.get(rank, 0), len(table), len(remaining))
            p_last = _p_value(last.get(rank, 0), n_coll, len(remaining))
            if excess[rank] > threshold and min(p_steps, p_last) < alpha:
                candidates.append((min(p_steps, p_last), -excess[rank], rank, p_steps, p_last))
        if not candidates:
            break
        _p, _e, rank, p_steps, p_last = min(candidates)
        r = by_rank[rank]
        slow.append(
            {
                "rank": rank,
                "node": r["node"],
                "excess_ratio": excess[rank],
                "slowest_steps": slow_steps.get(rank, 0),
                "steps": len(table),
                "p_value_steps": p_steps,
                "last_arrivals": last.get(rank, 0),
                "collectives": n_coll,
                "p_value_arrivals": p_last,
                "compute_per_iteration_ms": r.get("compute_per_iteration_ms"),
                "median_compute_per_iteration_ms": compute_median,
                "comm_wait_per_iteration_ms": r.get("comm_wait_per_iteration_ms"),
                "median_comm_wait_per_iteration_ms": wait_median,
            }
        )
        remaining.discard(rank)
    if slow:
        test["verdict"] = f"{len(slow)} straggler(s) at {alpha:.0%} significance"
    elif need is not None and len(table) < need and n_coll < need:
        test["verdict"] = (
            f"none stands out; {len(table)} profiled steps cannot show one at {alpha:.0%} "
            f"significance with {count} ranks (profile at least {need} steps)"
        )
    else:
        test["verdict"] = "none stands out"
    slow_ranks = {s["rank"] for s in slow}
    by_node: dict = {}
    for r in ranks:
        if r["rank"] in steps:
            by_node.setdefault(r["node"], []).append(r["rank"])
    slow_nodes = []
    if len(by_node) > 1:
        for node, members in sorted(by_node.items()):
            if all(m in slow_ranks for m in members):
                slow_nodes.append(
                    {
                        "node": node,
                        "ranks": sorted(members),
                        "excess_ratio": statistics.median(s["excess_ratio"] for s in slow if s["rank"] in members),
                    }
                )
    return slow, slow_nodes, test
