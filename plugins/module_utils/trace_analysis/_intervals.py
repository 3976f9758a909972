# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Interval maths over (start, end) pairs: unions, lengths, differences, intersections.

Private to this collection; standard library only (it runs on the nodes). "Merged" intervals are
sorted and disjoint, as ``union`` returns them.
"""

from __future__ import annotations


def union(intervals) -> list:
    """Merged, sorted (start, end) intervals."""
    merged: list = []
    ordered = sorted(intervals)
    if not ordered:
        return merged
    low, high = ordered[0]
    for start, end in ordered:
        if start <= high:
            if end > high:  # noqa: PLR1730 - max() costs a call per interval here
                high = end
        else:
            merged.append([low, high])
            low, high = start, end
    merged.append([low, high])
    return merged


def length(intervals) -> float:
    return sum(end - start for start, end in intervals)


def subtract(a, b) -> list:
    """Parts of the merged intervals ``a`` not covered by the merged intervals ``b``."""
    out, j = [], 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            if cur >= end:
                break
            k += 1
        if cur < end:
            out.append([cur, end])
    return out


def intersect_length(a, b) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def clip(intervals, window) -> list:
    """Parts of merged ``intervals`` inside merged ``window``."""
    return subtract(intervals, subtract(union(intervals), window)) if window else intervals
