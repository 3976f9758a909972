# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric sweep's schedule and its localisation, on sweeps simulated from per-node link
capacities with realistic noise (seeded: every run sees the same figures)."""

from __future__ import annotations

import json
import math
import random

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep

LINE_GBPS = 100.0


def capacities(n, rng, slow=(), factor=0.2, egress_only=()):
    """Per node (egress, ingress) in Gbit/s: healthy nodes spread +-10 % around the line rate (NIC,
    PCIe and placement differences that persist across rounds), the slow ones at ``factor`` of it
    (both ways, or on egress only: a throttled egress, as tc tbf does)."""
    caps = []
    for rank in range(n):
        base = LINE_GBPS * rng.uniform(0.9, 1.1)
        egress = base * factor if rank in slow or rank in egress_only else base
        ingress = base * factor if rank in slow else base
        caps.append((egress, ingress))
    return caps


def simulate(caps, rng, count=_sweep.ROUNDS, sigma=0.1, dip=0.05, collapse=0.01, round_factors=None, lost=()):
    """The sweep's measurements: a pair's rate is min(sender's egress, receiver's ingress) x the
    round's own factor (an oversubscribed spine) x lognormal noise (sigma) x a 30 % dip on a
    fraction ``dip`` of the pairs x a collapse to 0.3 on a fraction ``collapse``; each end then
    reads it with a small noise of its own. ``lost``: (round, rank) whose own figures are lost."""
    schedule = _sweep.rounds(len(caps), count)
    measurements = []
    for r, pairs in enumerate(schedule):
        factor = round_factors[r] if round_factors else 1.0
        row = []
        for sender, receiver in pairs:
            rate = min(caps[sender][0], caps[receiver][1]) * factor * rng.lognormvariate(0, sigma)
            if rng.random() < dip:
                rate *= 0.7
            if rng.random() < collapse:
                rate *= 0.3
            send = None if (r, sender) in lost else rate * rng.lognormvariate(0, 0.02)
            recv = None if (r, receiver) in lost else rate * rng.lognormvariate(0, 0.02)
            row.append({"sender": sender, "receiver": receiver, "send_gbps": send, "recv_gbps": recv})
        measurements.append(row)
    return measurements


def named(result):
    return sorted(entry["rank"] for entry in result["slow"])


# --- The schedule ---


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64, 100, 999, 1000])
def test_every_node_sends_once_and_receives_once_per_round_and_meets_new_partners(n):
    schedule = _sweep.rounds(n)
    assert len(schedule) == min(_sweep.ROUNDS, n - 1)
    for pairs in schedule:
        assert sorted(s for s, _r in pairs) == list(range(n)) and sorted(r for _s, r in pairs) == list(range(n))
        assert all(s != r for s, r in pairs)
        shift = {(r - s) % n for s, r in pairs}
        assert len(shift) == 1  # one shift per round: all pairs of a round run at once
    # In each direction a node's partner differs in every round (what localisation rests on).
    for rank in range(n):
        to = [dict(pairs)[rank] for pairs in schedule]
        assert len(set(to)) == len(to)
    # Where n >= 6 no two nodes meet twice, in either direction.
    met = [frozenset(pair) for pairs in schedule for pair in {frozenset(p) for p in pairs}]
    if n >= 6:
        assert len(met) == len(set(met))


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, []),
        (2, [1]),
        (3, [1, 2]),
        (4, [1, 2, 3]),
        (5, [1, 2, 4]),
        (6, [1, 3, 2]),
        (8, [1, 4, 2]),
        (64, [1, 32, 21]),
        (1000, [1, 500, 333]),
    ],
)
def test_the_shifts_are_one_then_half_then_a_third_and_small_n_takes_what_it_has(n, expected):
    assert _sweep.shifts(n) == expected
    assert _sweep.rounds(2) == [[(0, 1), (1, 0)]]  # n=2: one round, both directions at once


def test_the_schedule_is_bounded_by_its_rounds_whatever_n_and_count_is_honoured():
    assert max(len(_sweep.rounds(n)) for n in range(1, 2001, 37)) == _sweep.ROUNDS
    assert len(_sweep.rounds(1000, count=5)) == 5 and len(_sweep.rounds(7, count=10)) == 6  # at most n - 1
    assert _sweep.shifts(1000, count=0) == []
    with pytest.raises(ValueError):
        _sweep.shifts(0)


def test_a_nodes_plan_is_its_part_of_the_schedule():
    schedule = _sweep.rounds(64)
    for rank in (0, 17, 63):
        for step in _sweep.plan(64, rank):
            pairs = schedule[step["round"]]
            assert (rank, step["send_to"]) in pairs and (step["recv_from"], rank) in pairs
    with pytest.raises(ValueError):
        _sweep.plan(8, 8)


# --- Localisation on simulated sweeps ---


@pytest.mark.parametrize(("n", "seeds"), [(8, 20), (64, 20), (1000, 20)])
def test_one_slow_node_is_named_every_time_and_no_other(n, seeds):
    for seed in range(seeds):
        rng = random.Random(seed)
        slow = rng.randrange(n)
        result = _sweep.localise(simulate(capacities(n, rng, slow={slow}), rng), nodes=n)
        assert named(result) == [slow], seed
        entry = result["slow"][0]
        assert entry["direction"] == "both" and entry["ratio"] < 0.35 and entry["rounds"] == 3
        assert entry["send_gbps"] < 0.35 * entry["median_gbps"] > entry["recv_gbps"]


@pytest.mark.parametrize(("n", "seeds"), [(8, 30), (64, 20), (1000, 20)])
def test_two_slow_nodes_are_both_named_and_only_them(n, seeds):
    for seed in range(seeds):
        rng = random.Random(1000 + seed)
        slow = set(rng.sample(range(n), 2))
        result = _sweep.localise(simulate(capacities(n, rng, slow=slow), rng), nodes=n)
        assert named(result) == sorted(slow), seed
        assert result["unresolved"] == [], seed


@pytest.mark.parametrize("n", [8, 64, 1000])
def test_two_slow_nodes_paired_with_each_other_in_a_round_are_both_named(n):
    for r, shift in enumerate(_sweep.shifts(n)):
        rng = random.Random(r)
        slow = {5, (5 + shift) % n}  # 5 sends to its slow peer in round r (both ends slow there)
        result = _sweep.localise(simulate(capacities(n, rng, slow=slow), rng), nodes=n)
        assert named(result) == sorted(slow)


@pytest.mark.parametrize("n", [8, 64, 1000])
def test_a_node_slow_on_egress_only_is_named_for_sending(n):
    for seed in range(10):
        rng = random.Random(2000 + seed)
        throttled = rng.randrange(n)
        result = _sweep.localise(simulate(capacities(n, rng, egress_only={throttled}), rng), nodes=n)
        assert named(result) == [throttled], seed
        entry = result["slow"][0]
        assert entry["direction"] == "send" and entry["recv_gbps"] > 0.8 * entry["median_gbps"]


def test_an_egress_slow_and_an_ingress_slow_node_are_each_named_for_their_own_direction():
    rng = random.Random(7)
    caps = capacities(64, rng)
    caps[10] = (caps[10][0] * 0.25, caps[10][1])
    caps[40] = (caps[40][0], caps[40][1] * 0.25)
    result = _sweep.localise(simulate(caps, rng), nodes=64)
    assert [(e["rank"], e["direction"]) for e in result["slow"]] == [(10, "send"), (40, "recv")]


@pytest.mark.parametrize(("n", "seeds"), [(8, 100), (64, 100), (1000, 100)])
def test_no_healthy_node_is_named(n, seeds):
    for seed in range(seeds):
        rng = random.Random(3000 + seed)
        result = _sweep.localise(simulate(capacities(n, rng), rng), nodes=n)
        assert result["localisable"] and result["slow"] == [] and result["unresolved"] == [], seed
        ratios = [node["ratio"] for node in result["nodes"].values()]
        assert min(ratios) > 0.6 and 0.9 < result["median_gbps"] / LINE_GBPS < 1.25


def test_a_round_slower_everywhere_names_nobody_and_does_not_hide_a_slow_node():
    for seed in range(20):
        rng = random.Random(4000 + seed)
        healthy = simulate(capacities(64, rng), rng, round_factors=[1.0, 0.45, 1.0])  # spine 2:1 under n/2
        assert _sweep.localise(healthy, nodes=64)["slow"] == []
        rng = random.Random(4000 + seed)
        caps = capacities(64, rng, slow={3})
        assert named(_sweep.localise(simulate(caps, rng, round_factors=[1.0, 0.45, 1.0]), nodes=64)) == [3]


def test_a_figure_lost_counts_neither_way_and_a_node_never_measured_is_listed():
    rng = random.Random(5)
    caps = capacities(8, rng, slow={2})
    # Node 2's own figures of round 0 are lost: it is judged on rounds 1 and 2, and still named.
    result = _sweep.localise(simulate(caps, rng, lost={(0, 2)}), nodes=8)
    assert named(result) == [2] and result["slow"][0]["rounds"] == 2
    assert result["nodes"]["2"]["send_by_round"][0] is None and result["nodes"]["2"]["recv_by_round"][0] is None
    # Node 2's figures of rounds 0 and 1 lost: one round left, not enough to tell it from its partner.
    result = _sweep.localise(simulate(caps, random.Random(5), lost={(0, 2), (1, 2)}), nodes=8)
    assert named(result) == []
    assert {(e["rank"], e["direction"]) for e in result["unresolved"]} == {(2, "send"), (2, "recv")}
    assert all(e["rounds"] == 1 and "only round" in e["why"] for e in result["unresolved"])
    # Node 6 lost in every round: not measured, not named; the other slow one still is.
    rng = random.Random(6)
    everything_lost = {(r, 6) for r in range(3)}
    result = _sweep.localise(simulate(capacities(8, rng, slow={1}), rng, lost=everything_lost), nodes=8)
    assert result["not_measured"] == [6] and named(result) == [1]
    assert result["nodes"]["6"]["send_gbps"] is None and result["nodes"]["6"]["ratio"] is None


def test_a_node_whose_only_measured_partners_were_slow_is_unresolved_not_named():
    # At 8 nodes node 6 receives from 5, 2 and 4 (shifts 1, 4, 2); 5 and 2 are slow and 6's own
    # figures of round 2 are lost: both its receiving rounds were low, each with a slow sender.
    rng = random.Random(12)
    result = _sweep.localise(simulate(capacities(8, rng, slow={2, 5}), rng, lost={(2, 6)}), nodes=8)
    assert named(result) == [2, 5]
    [entry] = result["unresolved"]
    assert (entry["rank"], entry["direction"], entry["rounds"]) == (6, "recv", 2) and "every partner" in entry["why"]
    assert result["nodes"]["6"]["send_ratio"] > 0.8  # its sending was measured against a healthy peer


def test_a_node_absent_from_every_pair_is_not_measured_and_nodes_defaults_to_the_ranks_seen():
    rng = random.Random(8)
    measurements = simulate(capacities(8, rng), rng)
    dropped = [[p for p in pairs if 7 not in (p["sender"], p["receiver"])] for pairs in measurements]
    assert _sweep.localise(dropped, nodes=8)["not_measured"] == [7]
    assert len(_sweep.localise(measurements)["nodes"]) == 8


def test_two_nodes_cannot_be_localised_and_nothing_is_named():
    rng = random.Random(9)
    result = _sweep.localise(simulate(capacities(2, rng, slow={0}), rng), nodes=2)
    assert result["localisable"] is False and "2 node(s)" in result["reason"]
    assert result["slow"] == [] and result["unresolved"] == [] and len(result["rounds"]) == 1
    assert result["nodes"]["0"]["send_gbps"] < 30  # its figures are still reported


def test_one_node_has_no_sweep():
    result = _sweep.localise([], nodes=1)
    assert result["localisable"] is False and result["slow"] == [] and result["rounds"] == []
    assert result["not_measured"] == [0]


def test_three_nodes_localise_one_slow_node_even_though_they_meet_twice():
    # Without collapses: at 3 nodes the healthy reference rests on two pairs (the one pair without
    # the slow node, in each round), and a collapse of one of them can hide the slow node.
    for seed in range(20):
        rng = random.Random(6000 + seed)
        slow = rng.randrange(3)
        result = _sweep.localise(simulate(capacities(3, rng, slow={slow}), rng, collapse=0), nodes=3)
        assert result["localisable"] and named(result) == [slow], seed
        rng = random.Random(7000 + seed)
        assert named(_sweep.localise(simulate(capacities(3, rng), rng), nodes=3)) == []


def test_four_nodes_localise_one_and_two_slow_nodes():
    for seed in range(20):
        rng = random.Random(8000 + seed)
        slow = set(rng.sample(range(4), rng.choice((1, 2))))
        assert named(_sweep.localise(simulate(capacities(4, rng, slow=slow), rng), nodes=4)) == sorted(slow), seed


def test_two_slow_nodes_of_three_are_unresolved_not_blamed_on_the_healthy_one():
    rng = random.Random(10)
    result = _sweep.localise(simulate(capacities(3, rng, slow={0, 1}), rng), nodes=3)
    assert 2 not in named(result)


def test_the_result_is_json_and_carries_the_figures():
    rng = random.Random(11)
    result = _sweep.localise(simulate(capacities(8, rng, slow={4}), rng), threshold=0.5, nodes=8)
    assert json.loads(json.dumps(result)) == result
    assert result["threshold"] == 0.5 and result["version"] == _sweep.VERSION
    assert [row["round"] for row in result["rounds"]] == [0, 1, 2] and all(r["pairs"] == 8 for r in result["rounds"])
    node = result["nodes"]["4"]
    assert len(node["send_by_round"]) == 3 and node["send_gbps"] == max(node["send_by_round"])
    references = [row["median_gbps"] for row in result["rounds"]]
    for d in ("send", "recv"):
        by_round = node[d + "_by_round"]
        assert node[d + "_ratio"] == pytest.approx(max(g / m for g, m in zip(by_round, references)), abs=2e-3)
    assert node["ratio"] == min(node["send_ratio"], node["recv_ratio"]) < 0.3
    # A round's reference leaves out the slow node's partners of that round: it is the healthy pairs' median.
    assert all(0.85 * LINE_GBPS < m < 1.15 * LINE_GBPS for m in references)
    assert result["slow"][0]["median_gbps"] == result["median_gbps"]


def test_bad_figures_are_not_rates_and_bad_pairs_are_refused():
    pairs = [
        {"sender": 0, "receiver": 1, "send_gbps": math.nan, "recv_gbps": -1},
        {"sender": 1, "receiver": 2, "send_gbps": True, "recv_gbps": "10"},
        {"sender": 2, "receiver": 0, "send_gbps": 10, "recv_gbps": 10.0},
    ]
    result = _sweep.localise([pairs], nodes=3)
    assert result["nodes"]["0"]["send_gbps"] is None and result["nodes"]["2"]["send_gbps"] == 10.0
    for bad in ({"sender": 0, "receiver": 0}, {"sender": 0, "receiver": 9}, {"sender": "0", "receiver": 1}):
        with pytest.raises(ValueError):
            _sweep.localise([[bad]], nodes=3)
    with pytest.raises(ValueError):  # a node sending twice in one round is not a shift
        _sweep.localise([[{"sender": 0, "receiver": 1}, {"sender": 0, "receiver": 2}]], nodes=3)
    with pytest.raises(ValueError):
        _sweep.localise([], threshold=1.5)
