# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which ranks hold the others back: a per-step and per-collective test with a stated significance;
and a slow fabric link's evidence in one line (the report's opening rows and junit.xml say it alike).

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


def _excess(table: list, medians: list, key) -> float:
    """The median over rows of (this one's value / the row's median) - 1: how much slower it is."""
    ratios = [row[key] / m for row, m in zip(table, medians) if m > 0 and key in row]
    return statistics.median(ratios) - 1.0 if ratios else 0.0


def _steps_needed(candidates: int, alpha: float) -> int | None:
    """The fewest rows in which one of ``candidates`` alone the slowest every time is significant."""
    return next((n for n in range(1, 64) if candidates * (1 / candidates) ** n < alpha), None)


def _verdict(found, named, nobody, steps, collectives, need, candidates, noun, alpha) -> str:
    """The test's one line: how many it named, or why nobody, with the steps it would take."""
    if found:
        return f"{len(found)} {named} at {alpha:.0%} significance"
    if need is not None and steps < need and collectives < need:
        return (
            f"{nobody} stands out; {steps} profiled steps cannot show one at {alpha:.0%} "
            f"significance with {candidates} {noun} (profile at least {need} steps)"
        )
    return f"{nobody} stands out"


def _node_rows(table: list, members: dict) -> list:
    """Each row ({rank: value}) as {node: the median of its ranks' values}."""
    rows = []
    for row in table:
        rows.append(
            {
                node: statistics.median(row[r] for r in ranks if r in row)
                for node, ranks in members.items()
                if any(r in row for r in ranks)
            }
        )
    return rows


def slow_nodes_test(table: list, arrivals: list, members: dict, threshold: float, alpha: float) -> tuple:
    """Nodes slow as a whole: a throttled or misconfigured node slows all its ranks together, so none
    of them is alone the slowest rank; the node is, among the nodes.

    Per profiled step, each node's value is the median compute of its ranks; the node alone the
    slowest, by more than ``threshold`` over the step's median node, scores one. Per collective, the
    node whose ranks wait least (median) arrived last and scores one. Under noise alone each of N
    nodes is that with chance 1/N: a binomial tail, Bonferroni over the N nodes, named under
    ``alpha`` when the node's median compute over the steps exceeds the median node's by more than
    ``threshold``; then the test repeats without it. Each finding carries its per-step evidence."""
    if len(members) < 2:
        return [], {"nodes": len(members), "verdict": "not tested: fewer than two nodes"}
    node_table = _node_rows(table, members)
    node_arrivals = _node_rows(arrivals, members)
    medians = [statistics.median(row.values()) for row in node_table]
    found, remaining = [], set(members)
    while len(remaining) >= 2:
        slowest = _slowest_counts(node_table, remaining, True, threshold)
        last = _slowest_counts(node_arrivals, remaining, False, 0.0)
        candidates = []
        for node in remaining:
            excess = _excess(node_table, medians, node)
            p_steps = _p_value(slowest.get(node, 0), len(node_table), len(remaining))
            p_last = _p_value(last.get(node, 0), len(node_arrivals), len(remaining))
            if excess > threshold and min(p_steps, p_last) < alpha:
                candidates.append((min(p_steps, p_last), -excess, node, p_steps, p_last, excess))
        if not candidates:
            break
        _p, _e, node, p_steps, p_last, excess = min(candidates)
        found.append(
            {
                "node": node,
                "ranks": sorted(members[node]),
                "excess_ratio": excess,
                "slowest_steps": slowest.get(node, 0),
                "steps": len(node_table),
                "p_value_steps": p_steps,
                "last_arrivals": last.get(node, 0),
                "collectives": len(node_arrivals),
                "p_value_arrivals": p_last,
                # The evidence, step by step: this node's median compute against the median node's.
                "per_step": [
                    {"node_compute_ms": row[node], "median_node_compute_ms": m}
                    for row, m in zip(node_table, medians)
                    if node in row
                ][:64],
            }
        )
        remaining.discard(node)
    test = {"nodes": len(members), "steps_needed": _steps_needed(len(members), alpha)}
    return found, test


def stragglers(ranks: list, threshold: float, evidence: dict | None = None, alpha: float = STRAGGLER_ALPHA) -> tuple:
    """Ranks that hold the others back, most certain first; nodes slow as a whole; the test's record.

    Per profiled step (same step number on every rank), the rank alone the slowest, by more than
    ``threshold`` over the step's median compute, scores one; per collective (same order on every
    rank), the rank that waits least arrived last and scores one. Under noise alone each of N ranks
    is the slowest with chance 1/N, so k of n is a binomial tail, Bonferroni-corrected over the N
    ranks: noise names somebody with chance below ``alpha``. A rank is named when either count is
    that unlikely and its median compute exceeds the others' by more than ``threshold`` and, on a
    node with other ranks, its node's other ranks' by as much (a rank of a node that is slow as a
    whole is that node's finding, not its own); then the test repeats without it (step-down), so
    several stragglers are found one by one. Nodes slow as a whole: ``slow_nodes_test``.
    """
    evidence = evidence or {}
    by_rank = {r["rank"]: r for r in ranks}
    steps = _profiled_steps(evidence, by_rank)
    test: dict = {"alpha": alpha, "threshold": threshold, "ranks": len(steps), "steps": 0, "collectives": 0}
    if len(steps) < 2:
        test["verdict"] = "not tested: fewer than two ranks with profiled steps"
        test["node_test"] = {"verdict": "not tested: fewer than two ranks with profiled steps"}
        return [], [], test
    count = len(steps)
    table, medians, arrivals, n_coll = _evidence_rows(steps, evidence)
    need = _steps_needed(count, alpha)
    test.update(steps=len(table), collectives=n_coll, steps_needed=need)
    members: dict = {}
    for rank in steps:
        members.setdefault(by_rank[rank]["node"], []).append(rank)
    excess = {rank: _excess(table, medians, rank) for rank in steps}
    peers = _excess_over_node(table, members)
    slow = _step_down(ranks, by_rank, set(steps), table, medians, arrivals, excess, peers, threshold, alpha)
    # A node is judged by its other ranks: one slow rank of two would move a two-rank node's median
    # by half its excess, and it is that rank's finding already.
    named = {s["rank"] for s in slow}
    unexplained = {node: [r for r in ranks_ if r not in named] for node, ranks_ in members.items()}
    unexplained = {node: ranks_ for node, ranks_ in unexplained.items() if ranks_}
    slow_nodes, node_test = slow_nodes_test(table, arrivals, unexplained, threshold, alpha)
    test["verdict"] = _verdict(slow, "straggler(s)", "none", len(table), n_coll, need, count, "ranks", alpha)
    if len(unexplained) >= 2:  # else slow_nodes_test said why
        node_test["verdict"] = _verdict(
            slow_nodes,
            "slow node(s)",
            "no node",
            len(table),
            n_coll,
            node_test.get("steps_needed"),
            len(unexplained),
            "nodes",
            alpha,
        )
    test["node_test"] = node_test
    return slow, slow_nodes, test


def _profiled_steps(evidence: dict, by_rank: dict) -> dict:
    """Per rank of ``by_rank`` with profiled steps in its ``evidence``: {step number: compute ms}."""
    steps = {}
    for rank, item in evidence.items():
        if rank in by_rank and item.get("step_compute_ms"):
            steps[rank] = {int(k): v for k, v in item["step_compute_ms"]}
    return steps


def _evidence_rows(steps: dict, evidence: dict) -> tuple:
    """(the steps every rank profiled as rows {rank: compute ms}, each row's median, the collectives
    every rank has as rows {rank: wait ms}, how many collectives); a step that barely ran is left out."""
    common = sorted(set.intersection(*(set(v) for v in steps.values())))
    table = [{r: steps[r][k] for r in steps} for k in common]
    # A step that barely ran (the profiler's closing step) is no evidence.
    medians = [statistics.median(row.values()) for row in table]
    typical = statistics.median(medians) if table else 0.0
    kept = [i for i, m in enumerate(medians) if typical > 0 and m >= 0.05 * typical]
    table, medians = [table[i] for i in kept], [medians[i] for i in kept]
    waits = {r: (evidence[r].get("collective_ms") or []) for r in steps}
    n_coll = min(len(w) for w in waits.values())
    arrivals = [{r: waits[r][i] for r in steps} for i in range(n_coll)]
    return table, medians, arrivals, n_coll


def _excess_over_node(table: list, members: dict) -> dict:
    """Per rank of a node with other ranks: the median over steps of its compute / the median of
    its node's other ranks' - 1 (how much slower it is than its own node)."""
    peers = {}
    for node_ranks in members.values():
        if len(node_ranks) < 2:
            continue
        for rank in node_ranks:
            others = [r for r in node_ranks if r != rank]
            ratios = [row[rank] / m for row in table if (m := statistics.median(row[r] for r in others)) > 0]
            peers[rank] = statistics.median(ratios) - 1.0 if ratios else 0.0
    return peers


def _step_down(ranks, by_rank, remaining, table, medians, arrivals, excess, peers, threshold, alpha) -> list:
    """The stragglers, most certain first: the most certain of ``remaining`` is named, then the test
    repeats without it until nobody is significant or fewer than two ranks remain."""
    compute_median = statistics.median(r.get("compute_per_iteration_ms") or 0 for r in ranks)
    wait_median = statistics.median(r.get("comm_wait_per_iteration_ms") or 0 for r in ranks)
    n_coll = len(arrivals)
    slow = []
    while len(remaining) >= 2:
        slow_steps = _slowest_counts(table, remaining, True, threshold)
        last = _slowest_counts(arrivals, remaining, False, 0.0)
        candidate = _most_certain(slow_steps, last, len(table), n_coll, len(remaining), excess, peers, threshold, alpha)
        if candidate is None:
            break
        rank, p_steps, p_last = candidate
        r = by_rank[rank]
        slow.append(
            {
                "rank": rank,
                "node": r["node"],
                "excess_ratio": excess[rank],
                "excess_over_node_ratio": peers.get(rank),
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
                "per_step": [{"compute_ms": row[rank], "median_compute_ms": m} for row, m in zip(table, medians)][:64],
            }
        )
        remaining.discard(rank)
    return slow


def _most_certain(slow_steps, last, n_steps, n_coll, n_ranks, excess, peers, threshold, alpha) -> tuple | None:
    """(rank, p-value of its slowest steps, of its last arrivals) of the rank most certainly a
    straggler this round (least p-value, then greatest excess), or None when none is significant."""
    found = []
    for rank in slow_steps.keys() | last.keys():
        if excess[rank] <= threshold or peers.get(rank, excess[rank]) <= threshold:
            continue
        p_steps = _p_value(slow_steps.get(rank, 0), n_steps, n_ranks)
        p_last = _p_value(last.get(rank, 0), n_coll, n_ranks)
        if min(p_steps, p_last) < alpha:
            found.append((min(p_steps, p_last), -excess[rank], rank, p_steps, p_last))
    if not found:
        return None
    _p, _e, rank, p_steps, p_last = min(found)
    return rank, p_steps, p_last


def times(ratio) -> str:
    """A ratio as the report says it: '0.05x', '1.4x', '12x'; '' when not known."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        return ""
    return f"{ratio:.0f}x" if abs(ratio) >= 10 else f"{ratio:.2g}x"


def _gbps(value) -> str:
    return f"{value:.3g} Gbit/s"


def excess_compute(row: dict) -> str:
    """`` (+N% compute)`` of a slow node's or straggler's ``excess_ratio``; '' when it has none."""
    ratio = row.get("excess_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        return ""
    return f" (+{ratio * 100:.0f}% compute)"


def slow_node_text(node: dict) -> str:
    """A slow node as the report's opening row and a regression's line say it."""
    return f"slow node {node.get('node')}{excess_compute(node)}"


def slow_link_evidence(link: dict) -> str:
    """One slow link in one line, as the report's opening row and junit.xml's ``slow link`` say it,
    from an entry of the report's ``slow_links`` (or of run.json's ``fabric_sweep.slow``, which has
    no collective figures); a part whose figure is not known is left out:
    '10.0.0.3: fabric 0.19 Gbit/s sent against a median of 3.8 Gbit/s (0.05x); collectives 1.4x the
    median node; allreduce busbw 0.3x the fabric'."""
    number = (int, float)
    direction = link.get("direction")
    rates = [
        _gbps(link[key]) + f" {said}"
        for key, said, own in (("send_gbps", "sent", ("send", "both")), ("recv_gbps", "received", ("recv", "both")))
        if direction in own and isinstance(link.get(key), number)
    ]
    fabric = "fabric " + (", ".join(rates) if rates else f"slow ({direction or 'direction not recorded'})")
    if isinstance(link.get("median_gbps"), number):
        fabric += f" against a median of {_gbps(link['median_gbps'])}"
    if times(link.get("ratio")):
        fabric += f" ({times(link.get('ratio'))})"
    parts = [f"{link.get('node')}: {fabric}"]
    if times(link.get("collective_ratio")):
        parts.append(f"collectives {times(link['collective_ratio'])} the median node")
    if times(link.get("busbw_ratio")):
        parts.append(f"{link.get('busbw_op') or 'collective'} busbw {times(link['busbw_ratio'])} the fabric")
    return "; ".join(parts)
