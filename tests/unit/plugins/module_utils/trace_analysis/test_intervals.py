# SPDX-License-Identifier: GPL-3.0-or-later
"""Interval maths against a brute-force reference: every unit cell of a small grid is in or out."""

from __future__ import annotations

import random

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _intervals


def cells(intervals) -> set:
    """The unit cells [i, i+1) an integer interval list covers: the reference the functions must match."""
    return {i for start, end in intervals for i in range(start, end)}


def random_intervals(rng, count, span=60):
    out = []
    for _interval in range(count):
        start = rng.randrange(span)
        out.append((start, start + rng.randrange(1, 12)))
    return out


@pytest.mark.parametrize("seed", range(200))
def test_union_subtract_intersect_and_clip_match_the_cells_they_cover(seed):
    rng = random.Random(seed)
    a = _intervals.union(random_intervals(rng, rng.randrange(0, 8)))
    b = _intervals.union(random_intervals(rng, rng.randrange(0, 8)))
    assert all(x[1] < y[0] for x, y in zip(a, a[1:]))  # merged: sorted, disjoint, not touching
    assert _intervals.length(a) == len(cells(a))
    assert cells(_intervals.subtract(a, b)) == cells(a) - cells(b)
    assert _intervals.intersect_length(a, b) == len(cells(a) & cells(b))
    # clip: the parts inside the window b; no window at all means the whole run is the window.
    assert cells(_intervals.clip(a, b)) == (cells(a) & cells(b) if b else cells(a))


def test_touching_intervals_merge_and_an_empty_window_clips_nothing():
    assert _intervals.union([(5, 7), (1, 3), (3, 5)]) == [[1, 7]]
    assert _intervals.union([]) == [] and _intervals.length([]) == 0
    assert _intervals.clip([[1, 4]], []) == [[1, 4]]  # no window: the whole run is the window
    assert _intervals.subtract([[0, 10]], [[2, 3], [5, 6]]) == [[0, 2], [3, 5], [6, 10]]
