# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The scaling ladder's rungs and each rung's groups (controller side, pure).

A campaign runs every node alone, then in pairs, fours ... and last all the nodes still in it, each
rung's groups at once. The groups of a rung are a function of the nodes' order (the cluster file's,
less the nodes that left the campaign) and a seed kept in campaign.json, so a campaign can be read
back and replayed. They are chosen to localise: while the rung before left groups of one size (no
node excluded or sitting out since), two nodes that shared a group share none at the next rung
whenever there are at least k of those groups (a group of k then takes one node from each), so a
slow pair at k=2 and a slow four at k=4 meet in one node. Once groups of unequal size come in, pairs
may meet again where a better split exists (measured: 9 nodes with one excluded after rung 2 meet
again at k=4 in 131 of 200 seeds); the localisation then needs a rung more.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any


class LadderError(ValueError):
    """A rung list that cannot be run (the message names aorta_scaling_sizes and the value)."""


def sizes(count: int, given: Iterable[Any] | None = None) -> list[int]:
    """The rungs' group sizes for ``count`` nodes: ``given`` (aorta_scaling_sizes) sorted, each a
    whole number from 1 to ``count``, else 1, 2, 4 ... below ``count`` and ``count`` itself last (the
    top rung: every node still in the campaign). Raises LadderError naming a bad size."""
    if count < 1:
        raise LadderError("aorta_scaling_sizes: the campaign has no node to run")
    if given is None:
        found, size = [], 1
        while size < count:
            found.append(size)
            size *= 2
        return [*found, count]
    chosen = []
    for value in given:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
            raise LadderError(f"aorta_scaling_sizes: {value!r} is not a group size from 1 to {count} (the node count)")
        chosen.append(value)
    if not chosen:
        raise LadderError("aorta_scaling_sizes: give at least one group size, e.g. [1, 2, 4]")
    return sorted(set(chosen))


def rung_size(size: int, count: int, largest: int, stretch: bool = True, previous: int | None = None) -> int | None:
    """The size a rung runs at once ``count`` nodes are left, None when it is skipped. With the
    default rungs (``stretch``) the top rung (``largest``, the last of ``sizes``) follows the nodes
    still in the campaign (N, or fewer once nodes were excluded); sizes the user gave
    (aorta_scaling_sizes) are run as given. A rung larger than what is left is skipped, and so is
    one the size of the rung run before it (``previous``: after exclusions the top rung may shrink
    to it)."""
    found = count if stretch and size == largest else size
    if found < 1 or found > count or found == previous:
        return None
    return found


def groups(
    nodes: Sequence[str], size: int, previous: Sequence[Sequence[str]] = (), seed: int = 0, rung: int = 0
) -> tuple[list[list[str]], list[str]]:
    """Rung ``rung``'s ``(groups, left out)``: ⌊len(nodes)/size⌋ disjoint groups of ``size`` (each
    group's first node is its head) and the nodes that sit this rung out.

    The nodes are laid out one from each of the previous rung's groups in turn (those groups in an
    order drawn from ``seed`` and ``rung``), then one more from each, and so on; cut into runs of
    ``size``, two nodes of one previous group are then ``len(previous)`` places apart (when those
    groups are of one size) and share a group only when ``size`` is more than that. With no previous
    rung each node is its own group. The nodes left out are the layout's last: a different draw each
    rung, so a node sits out rarely twice."""
    if size < 1:
        raise LadderError(f"aorta_scaling_sizes: {size} is not a group size")
    present = set(nodes)
    order = {node: index for index, node in enumerate(nodes)}
    earlier = [[node for node in group if node in present] for group in previous]
    earlier = [group for group in earlier if group]
    seen = {node for group in earlier for node in group}
    # Nodes no previous group held (a first rung, or sizes that skip rungs) each stand alone.
    earlier += [[node] for node in nodes if node not in seen]
    draw = random.Random(f"{seed}:{rung}")
    draw.shuffle(earlier)
    layout = []
    for depth in range(max((len(group) for group in earlier), default=0)):
        layout += [group[depth] for group in earlier if depth < len(group)]
    count = len(layout) // size
    made = [layout[index * size : (index + 1) * size] for index in range(count)]
    # The head is the group's first node in the cluster file's order (its own node 0).
    made = [sorted(group, key=order.__getitem__) for group in made]
    return made, sorted(layout[count * size :], key=order.__getitem__)


def shared_pairs(before: Sequence[Sequence[str]], after: Sequence[Sequence[str]]) -> int:
    """How many pairs of nodes that shared a group in ``before`` share one in ``after`` (the
    groupings' test, and campaign.json's figure of how well a rung could separate the last)."""
    where = {node: index for index, group in enumerate(after) for node in group}
    count = 0
    for group in before:
        placed = [where[node] for node in group if node in where]
        count += sum(placed[i] == placed[j] for i in range(len(placed)) for j in range(i + 1, len(placed)))
    return count
