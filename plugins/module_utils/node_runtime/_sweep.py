# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric sweep before the ranks start: which node measures against which, and which node is
slow (target side, standard library only; no sockets, no clock: the schedule and the judgement).

Private to this collection. Runs on the node's Python (>= 3.9 syntax): the supervisors ask
``plan`` whom to send to and receive from in each round, the head's aggregator gives every node's
figures to ``localise``.

The schedule (``rounds``). Ranks 0..n-1; a round is a shift s: every node i sends to (i + s) mod n
and, at the same time, receives from (i - s) mod n, so every node sends exactly once and receives
exactly once per round and every pair of the round runs at once. The sweep therefore takes
``count`` x the per-round seconds whatever n (1000 nodes take as long as 8). The shifts are
distinct mod n, so in each direction a node meets a new partner in every round; where n >= 6 they
are also pairwise distinct up to sign (s != -t mod n), so no two nodes meet twice, in either
direction. The shifts are 1, then n // 2, then n // 3 (then n // 4, 2, 3, ... where one of these
falls in a class already taken); where n has fewer classes (n < 6) the reversed shifts fill in:
n=2 has one round only (shift 1: 0 <-> 1), n=3 two (1, 2), n=4 three (1, 2, 3: every node sends to
every other once), n=5 three (1, 2, 4: the pairs of shift 1 meet again reversed).

What each round proves (ranks laid out by rack, as inventories usually are):
  1. shift 1, mostly within a rack: every node's egress and ingress carry a full-rate stream at
     the same time (full duplex). A figure below the others says that one of the two ends of that
     pair (or the path between them) is slow, not which.
  2. shift n // 2, across the far half of the ranks (the bisection): every node has new partners
     in both directions. A node low again is the common factor of two pairs that share nothing
     else: one slow node is localised here, its partners of rounds 1 and 2 are low once each.
  3. shift n // 3, a third partner per direction: an innocent node may have had a slow partner in
     two rounds (one per slow node) but never in three, so two slow nodes are localised too (in
     general ``count`` rounds localise up to ``count`` - 1 slow nodes).

The judgement (``localise``). Every figure is a node's own: ``send_gbps`` measured at the sender,
``recv_gbps`` at the receiver, and each end of a pair is judged on its own figure in its own
direction. Per direction, so that a node slow only on egress (a throttled egress, as ``tc tbf``
does) is named for sending, and a node's partner, dragged down in one direction of one round, is
not named: were both directions judged together, n=3's partners (which meet twice, reversed)
would be low in both rounds. A pair's rate is that of its slower end, so a figure is a lower bound
of the node's link in that direction: its best round is what the link showed it can do, and
"below threshold x the median in every round it took part in" is exactly "its best round is below".

Two references, both robust to the slow nodes themselves. The cluster's, ``median_gbps``: the
median over nodes and directions of each one's best round. A healthy node-direction's best stays
healthy unless every partner it had in that direction was slow (three slow nodes at least), so it
holds with two slow nodes even at 8 nodes, where a median over pairs would not (four of the eight
pairs of a round can touch a slow node). It picks the candidates, the node-directions whose best
is below it x threshold. Each round's own, ``rounds[r].median_gbps``: the median of that round's
figures over the pairs with no candidate at either end. Every figure is judged against its own
round's: a round slower everywhere (an oversubscribed spine under shift n // 2) reads as the
fabric, not as every node low, and cannot make a slow node's partner low in two rounds. A node's
``send_ratio`` and ``recv_ratio`` are its best figure-to-its-round's-reference, ``ratio`` the
worse of the two.

A node-direction below in every round is named only when the rounds show it was its own end: it
took part in at least ``MIN_ROUNDS`` rounds with distinct partners, and at least one of those
partners was not below in the opposite direction (its link is cleared, so the pair's low figure
was this node's). Otherwise it is listed under ``unresolved`` with the reason (a node measured in
one round only; a node whose only measured partners were slow). A figure lost (a node missing from
a round) counts neither way: the node is judged on its other rounds; a node with no figure at all
is listed under ``not_measured``. Two slow nodes paired with each other in one round are both
named: each has other rounds whose partner clears it. n=2 cannot localise (every figure is of the
same two ends, and with one slow the reference itself is the slow figure): ``localisable`` is
false, nothing is named. n=3 localises one slow node, but its healthy reference rests on one pair
per round; with two slow nodes of three the slow figure is the majority and nothing is named
(nor is the healthy one). In general fewer than half the nodes must be slow.

The threshold (``aorta_fabric_slow_threshold``, not wired here): 0.5 recommended. Simulated with
the simulator of tests/unit/plugins/module_utils/node_runtime/test_sweep.py: per pair lognormal
noise of sigma 0.1, 5 % of pairs dipping by 30 %, 1 % collapsing to 0.3 x, healthy nodes spread
+-10 % ("brief"), and twice all of that ("harsh"); sweeps with no slow node at 8, 64, 1000 nodes
(20000, 5000, 400 sweeps), with one slow node at 2000, 1000, 100:
  healthy sweeps with a node named (brief, 8/64/1000 nodes): 0.5: 0, 2, 0; 0.6: 1, 2, 1;
    0.7: 17, 21, 31; 0.8: 189, 266, 217. Harsh: 0.5: 6, 11, 9; 0.6: 38, 53, 59; 0.7: 422, 557, 322.
  a slow node named (brief, 8/64/1000, both ways slow) at 0.5: 0.2 x its rate 100 % every size;
    0.33 x 99.95 %, 100 %, 100 %; 0.4 x 90 %, 95 %, 96 %; 0.5 x (2 x slow) 15 %, 19 %, 16 %; at 0.6:
    0.5 x 81 %, 88 %, 92 %. Slow on egress only, a little less (0.4 x at 0.5: 79 %, 85 %, 90 %).
A healthy node is named at 0.5 only when its figures in one direction lose half their rate in all
three rounds, each independently (the 2 of 5000 at 64 nodes: three collapses each): about 2n x p^3
per sweep, p the chance of one such figure (1 % here). Up to 0.6 the healthy figures' floor (a 30 %
dip on a node 10 % below the rest: 0.63) keeps its margin; from 0.7 it is crossed. 0.5 names every
link 3 x slower or worse and most 2.5 x slower, a 2 x slow one sometimes: what slows a synchronous
job by half or more, with a margin noise does not reach. 0.6 catches most 2 x slow links for five
times the false findings under heavy noise.
"""

from __future__ import annotations

import itertools
import math
import statistics

VERSION = 1
ROUNDS = 3  # rounds of the sweep: two localise one slow node, the third a second one
DEFAULT_THRESHOLD = 0.5  # see the module's docstring: aorta_fabric_slow_threshold's intended default
MIN_ROUNDS = 2  # rounds, with distinct partners, a node-direction needs before it can be named
DIRECTIONS = ("send", "recv")
_OPPOSITE = {"send": "recv", "recv": "send"}
_DIGITS = 3  # Gbit/s to the Mbit/s, ratios to the thousandth


def _shift_class(shift, n):
    return min(shift % n, -shift % n)


def shifts(n, count=ROUNDS):
    """The shifts of the sweep's rounds for n nodes: min(count, n - 1) of them, distinct mod n, and
    distinct up to sign as long as n allows it (n >= 2 x count)."""
    if n < 1 or count < 0:
        raise ValueError(f"a sweep needs n >= 1 nodes and count >= 0 rounds, not n={n} count={count}")
    wanted = min(count, n - 1)
    picked = []
    # Lazily: the first few candidates usually suffice, and plan() is asked once per answer at the head.
    for shift in itertools.chain((1, n // 2, n // 3, n // 4), range(2, n)):
        if len(picked) == wanted:
            break
        if 0 < shift < n and all(_shift_class(shift, n) != _shift_class(p, n) for p in picked):
            picked.append(shift)
    for shift in list(picked):  # fewer classes than rounds: the reversed shifts, still distinct mod n
        if len(picked) == wanted:
            break
        if -shift % n not in picked:
            picked.append(-shift % n)
    return picked


def rounds(n, count=ROUNDS):
    """The sweep's schedule: a list of rounds, each a list of (sender, receiver) pairs, every node
    sending once and receiving once per round. n=1: no round; n=2: one (0 -> 1 and 1 -> 0)."""
    return [[(i, (i + s) % n) for i in range(n)] for s in shifts(n, count)]


def plan(n, rank, count=ROUNDS):
    """One node's part of the schedule: per round, whom it sends to and receives from."""
    if not 0 <= rank < n:
        raise ValueError(f"rank {rank} is not one of {n} nodes")
    return [
        {"round": r, "shift": s, "send_to": (rank + s) % n, "recv_from": (rank - s) % n}
        for r, s in enumerate(shifts(n, count))
    ]


def _rate(value):
    """A figure in Gbit/s, or None for one that is missing or not a rate (lost, NaN, negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _rank(value, n, where):
    if isinstance(value, bool) or not isinstance(value, int) or (n is not None and not 0 <= value < n):
        of = "" if n is None else f" of {n} nodes"
        raise ValueError(f"{where}: {value!r} is not a rank{of}")
    return value


def _collect(measurements, nodes):
    """Every node's own figures: {direction: {rank: [(round, partner, gbps), ...]}}, a row per
    round, and the node count (``nodes``, or one more than the highest rank seen)."""
    table = {d: {} for d in DIRECTIONS}
    round_rows = []
    highest = -1
    for r, pairs in enumerate(measurements):
        senders, receivers, figures = set(), set(), []
        for pair in pairs:
            where = f"round {r}"
            sender = _rank(pair.get("sender"), nodes, where)
            receiver = _rank(pair.get("receiver"), nodes, where)
            if sender == receiver or sender in senders or receiver in receivers:
                raise ValueError(f"{where}: {sender} -> {receiver} is not part of a shift")
            senders.add(sender)
            receivers.add(receiver)
            highest = max(highest, sender, receiver)
            for direction, rank, partner in (("send", sender, receiver), ("recv", receiver, sender)):
                gbps = _rate(pair.get(direction + "_gbps"))
                if gbps is not None:
                    table[direction].setdefault(rank, []).append((r, partner, gbps))
                    figures.append(gbps)
        round_rows.append({"round": r, "pairs": len(pairs), "figures": len(figures)})
    return table, round_rows, (highest + 1 if nodes is None else nodes)


def _round(value):
    return None if value is None else round(value, _DIGITS)


def _best(table, references=None):
    """Each node-direction's best round: {direction: {rank: gbps}}, or with ``references`` (per
    round), its best ratio to its round's reference."""
    best = {}
    for d in DIRECTIONS:
        best[d] = {}
        for rank, figures in table[d].items():
            values = [g if references is None else _ratio(g, references[r]) for r, _peer, g in figures]
            values = [v for v in values if v is not None]
            if values:
                best[d][rank] = max(values)
    return best


def _references(table, best, limit, rounds_count, reference):
    """Each round's own reference: the median of its figures over the pairs whose two ends both
    reached ``limit`` in the direction they had there (a slow node drags its partners of the round
    down; they are left out), or ``reference`` where a round has no such pair."""
    suspect = {d: {rank for rank, gbps in best[d].items() if gbps < limit} for d in DIRECTIONS}
    figures = [[] for _round_index in range(rounds_count)]
    for d in DIRECTIONS:
        for rank, rows in table[d].items():
            for r, partner, gbps in rows:
                if rank not in suspect[d] and partner not in suspect[_OPPOSITE[d]]:
                    figures[r].append(gbps)
    return [statistics.median(values) if values else reference for values in figures]


def _judge(table, ratios, threshold):
    """The node-directions below ``threshold`` x their round's reference in every round: {rank:
    [directions]} named, and the unresolved ones with the reason."""
    below = {d: {rank for rank, ratio in ratios[d].items() if ratio < threshold} for d in DIRECTIONS}
    named, unresolved = {}, []
    for direction in DIRECTIONS:
        other = _OPPOSITE[direction]
        for rank in sorted(below[direction]):
            figures = table[direction][rank]
            partners = {partner for _round_index, partner, _gbps in figures}
            cleared = [p for p in partners if p in ratios[other] and p not in below[other]]
            if len(partners) < MIN_ROUNDS:
                why = "below in the only round it was measured in: its partner may be the slow end"
            elif not cleared:
                why = "every partner it had was slow too: either end may be the slow one"
            else:
                named.setdefault(rank, []).append(direction)
                continue
            entry = {"rank": rank, "direction": direction, "ratio": round(ratios[direction][rank], _DIGITS)}
            unresolved.append(dict(entry, rounds=len(figures), why=why))
    return named, unresolved


def _ratio(gbps, reference):
    return None if gbps is None or not reference else gbps / reference


def _node(table, best, ratios, rank, rounds_count):
    """One node's figures: its best round per direction, the median over its rounds, each round's,
    and its best ratio to the rounds' references per direction (``ratio``: the worse direction)."""
    entry = {}
    for d in DIRECTIONS:
        figures = table[d].get(rank, [])
        by_round = [None] * rounds_count
        for r, _peer, gbps in figures:
            by_round[r] = _round(gbps)
        entry[d + "_gbps"] = _round(best[d].get(rank))
        entry[d + "_median_gbps"] = (
            _round(statistics.median([g for _round_index, _peer, g in figures])) if figures else None
        )
        entry[d + "_by_round"] = by_round
        entry[d + "_ratio"] = _round(ratios[d].get(rank))
    present = [entry[d + "_ratio"] for d in DIRECTIONS if entry[d + "_ratio"] is not None]
    entry["ratio"] = min(present) if present else None
    return entry


def _not_localisable(n, rounds_count, reference):
    if n < 3:
        return f"{n} node(s): every figure is of the same two ends, a slow one cannot be told from its peer"
    if rounds_count < MIN_ROUNDS:
        return f"{rounds_count} round(s): a node's low figure cannot be told from its partner's"
    if not reference:
        return "no figure above zero: nothing to measure against"
    return None


def _finding(entry, rank, directions, reference):
    return {
        "rank": rank,
        "direction": directions[0] if len(directions) == 1 else "both",
        "send_gbps": entry["send_gbps"],
        "recv_gbps": entry["recv_gbps"],
        "median_gbps": _round(reference),
        "ratio": entry["ratio"],
        "rounds": sum(1 for a, b in zip(entry["send_by_round"], entry["recv_by_round"]) if (a, b) != (None, None)),
    }


def localise(measurements, threshold=DEFAULT_THRESHOLD, nodes=None):
    """Which nodes are slow, from the sweep's figures.

    ``measurements``: one list per round (in the schedule's order), each of pair dicts
    ``{"sender": i, "receiver": j, "send_gbps": x, "recv_gbps": y}`` (x measured at i, y at j;
    either may be None or missing when that end's figure was lost). ``nodes``: the node count
    (default: one more than the highest rank seen; a node that never appears is then not counted).

    Returns a JSON-serialisable dict: ``median_gbps`` (the cluster's reference: the median over
    nodes and directions of each one's best round), ``rounds`` (per round: pairs, figures, and
    ``median_gbps``, the round's own reference), ``nodes`` ({str(rank): {send_gbps, recv_gbps
    (best rounds), send_median_gbps, recv_median_gbps, send_by_round, recv_by_round, send_ratio,
    recv_ratio (best ratio to the round's reference), ratio (the worse of the two)}}), ``slow``
    (the named: rank, direction send|recv|both, send_gbps, recv_gbps, median_gbps, ratio, rounds),
    ``unresolved`` (below in every round, not localised: rank, direction, ratio, rounds, why),
    ``not_measured`` (ranks), ``localisable`` and ``reason`` (why not), ``threshold``, ``version``.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"the slow threshold is a fraction of the median in (0, 1], not {threshold!r}")
    table, round_rows, n = _collect(measurements, nodes)
    best = _best(table)
    bests = list(best["send"].values()) + list(best["recv"].values())
    reference = statistics.median(bests) if bests else None
    reason = _not_localisable(n, len(measurements), reference)
    references = [reference] * len(measurements)
    if reason is None:
        references = _references(table, best, threshold * reference, len(measurements), reference)
    ratios = _best(table, references)
    named, unresolved = ({}, []) if reason else _judge(table, ratios, threshold)
    for row, round_reference in zip(round_rows, references):
        row["median_gbps"] = _round(round_reference)
    report = {str(rank): _node(table, best, ratios, rank, len(measurements)) for rank in range(n)}
    measured = set(table["send"]) | set(table["recv"])
    return {
        "version": VERSION,
        "threshold": threshold,
        "localisable": reason is None,
        "reason": reason,
        "median_gbps": _round(reference),
        "rounds": round_rows,
        "nodes": report,
        "slow": [_finding(report[str(rank)], rank, named[rank], reference) for rank in sorted(named)],
        "unresolved": unresolved,
        "not_measured": [rank for rank in range(n) if rank not in measured],
    }
