# SPDX-License-Identifier: GPL-3.0-or-later
"""The scaling ladder's rungs and groupings: disjoint, covering, a function of the node order and
the seed, and changing between rungs so that a slow pair and a slow four meet in one node."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _ladder


def nodes(n):
    return [f"node-{i:04d}" for i in range(n)]


def ladder(n, seed=0, given=None):
    """Every rung's (size, groups, left out) of a campaign where no node leaves."""
    present, previous, found = nodes(n), [], []
    chosen = _ladder.sizes(n, given)
    for rung, given_size in enumerate(chosen):
        size = _ladder.rung_size(given_size, len(present), chosen[-1])
        made, out = _ladder.groups(present, size, previous, seed, rung)
        found.append((size, made, out))
        previous = made
    return found


def test_the_rungs_double_up_to_every_node():
    assert _ladder.sizes(1) == [1]
    assert _ladder.sizes(4) == [1, 2, 4]
    assert _ladder.sizes(8) == [1, 2, 4, 8]
    assert _ladder.sizes(12) == [1, 2, 4, 8, 12]
    assert _ladder.sizes(1000)[-3:] == [256, 512, 1000]
    assert _ladder.sizes(12, [8, 2, 2]) == [2, 8]


@pytest.mark.parametrize("bad", [[0], [13], ["4"], [True], [], [2.0]])
def test_a_size_that_cannot_run_is_named(bad):
    with pytest.raises(_ladder.LadderError, match=r"^aorta_scaling_sizes: "):
        _ladder.sizes(12, bad)


def test_the_top_rung_follows_the_nodes_left_and_a_rung_too_big_is_skipped():
    assert _ladder.rung_size(8, 7, 8) == 7  # the top rung: every node still in the campaign
    assert _ladder.rung_size(4, 3, 8) is None  # a lower rung larger than what is left
    assert _ladder.rung_size(2, 3, 8) == 2
    # Sizes the user gave run as given: [1, 2, 4] on 8 nodes tops out at 4, not at 8.
    assert _ladder.rung_size(4, 8, 4, stretch=False) == 4
    # After exclusions the top rung may shrink to the rung run before it: not run twice.
    assert _ladder.rung_size(8, 4, 8, previous=4) is None


@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 12, 64, 100, 1000])
def test_each_rung_is_disjoint_covering_and_says_who_sits_out(n):
    everyone = set(nodes(n))
    for size, made, out in ladder(n):
        assert all(len(group) == size for group in made)
        placed = [node for group in made for node in group]
        assert len(placed) == len(set(placed)) == (n // size) * size
        assert set(placed) | set(out) == everyone and not set(placed) & set(out)
        # The head of each group is its first node in the cluster file's order.
        assert all(group == sorted(group) for group in made)


@pytest.mark.parametrize("n", [8, 32, 64, 100, 1000])
def test_nodes_that_shared_a_group_share_none_at_the_next_rung_where_the_count_allows(n):
    rungs = ladder(n)
    for (_k, before, _out), (size, after, _left) in itertools.pairwise(rungs):
        # Possible while each new group can take its nodes from distinct groups of the rung before.
        if len(before) >= size:
            assert _ladder.shared_pairs(before, after) == 0, (n, size)


def test_the_fewest_pairs_share_again_where_sharing_cannot_be_avoided():
    """8 nodes, rung 4 -> 8: each group of 8 must hold two groups of 4 whole; rung 2 -> 4 at 4 nodes:
    one group of 4 holds both pairs."""
    rungs = ladder(8)
    assert [rung[0] for rung in rungs] == [1, 2, 4, 8]
    assert _ladder.shared_pairs(rungs[1][1], rungs[2][1]) == 0
    sizes_four = ladder(4)
    assert _ladder.shared_pairs(sizes_four[1][1], sizes_four[2][1]) == 2


def test_a_slow_pair_and_a_slow_four_meet_in_one_node():
    rungs = ladder(64, seed=7)
    pairs, fours = rungs[1][1], rungs[2][1]
    for pair in pairs:
        meets = [set(pair) & set(four) for four in fours if set(pair) & set(four)]
        assert len(meets) == 2 and all(len(m) == 1 for m in meets)


def test_the_groupings_are_a_function_of_the_order_and_the_seed():
    assert ladder(100, seed=3) == ladder(100, seed=3)
    assert ladder(100, seed=3) != ladder(100, seed=4)
    # The nodes sitting out change from rung to rung.
    outs = [set(out) for _size, _made, out in ladder(100, seed=3) if out]
    assert len(outs) >= 2 and not set.intersection(*outs)


def test_a_node_that_left_is_in_no_group_and_its_old_partners_are_regrouped():
    present = nodes(8)
    pairs, _out = _ladder.groups(present, 2, [[node] for node in present], seed=1, rung=1)
    gone = pairs[0][0]
    fours, out = _ladder.groups([n for n in present if n != gone], 4, pairs, seed=1, rung=2)
    assert gone not in {node for group in fours for node in group} | set(out)
    assert len(fours) == 1 and len(out) == 3
