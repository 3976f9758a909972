# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which node of a scaling campaign is bad, rung by rung, from its groups' runs (controller side,
pure): group testing over the ladder's groupings (plugin_utils/campaign/_ladder.py).

An opening run of every node comes first (``opening``): its fabric sweep names a slow link and its
preflight and supervisors a dead or failing node, which no rung of single nodes or pairs can put on
one node. Then each rung's groups ran at once, each a whole run. A group is judged by its median iteration time
against the rung's reference, the median group (the lower of two: with two groups the faster is the
one that shows what the rung can do). A node is named, with its evidence, when:
  - at rung 1, alone, it is slow (its own compute: nothing else ran with it);
  - at any rung, the group's own run named it (dead, hung, a slow node or rank, a slow link), or its
    link's figures from its group's fabric sweep are below the rung's median over every node by the
    sweep's own factor (``_sweep.DEFAULT_THRESHOLD``): every pair of rung 2 is a sweep, so the
    rung's nodes are compared with each other, not only with their one partner;
  - at k >= 2, it is the one member of a slow group that no group that was not slow has cleared
    (a node in a group that was not slow at a rung of 2 or more has shown its compute and its link
    are fine). A slow group with two or more members nobody cleared keeps them as suspects; the next
    rung splits them (the ladder's groupings), and the one left is named then. A slow group whose
    members were all cleared is unexplained: a note, not a node (noise, or a fault no one node holds).
A named, failed or hung node leaves the campaign before the next rung (``aorta_scaling_exclude``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._sweep import DEFAULT_THRESHOLD
from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign._figures import positive

# A group slower than the rung's reference by more than this fraction is slow. Chosen from the
# simulation in tests/unit/plugins/plugin_utils/campaign/test_localise.py (100 seeds each at 8, 64
# and 1000 nodes; healthy nodes' compute spread +-5 %, each run's median iteration 2 % more): at 0.15
# no healthy node was named in any campaign; a node 1.6x slow or a link at a tenth of the line was
# named in every one, a node 1.2x slow in 88 of 100. At 0.12 a healthy node was named in 1-2 of 100
# at 64 and 1000 nodes, at 0.10 in 46 of 100 at 1000.
DEFAULT_SLOW = 0.15
# What a run's report says of a node's compute: the opening run leaves it to rung 1 (every node alone).
RUNG_1_KINDS = frozenset(("slow_node", "straggler"))
# What ends a group's run without its figures being a judgement of speed, on the group's account (a
# STOPPED group was stopped by the campaign's own Ctrl-C: no evidence against any member).
ENDED_BADLY = frozenset(("FAILED", "TIMEOUT", "HUNG"))


def reference(times: Iterable[float]) -> float | None:
    """The rung's reference iteration time: the median group, the lower of two middles."""
    found = sorted(times)
    return statistics.median_low(found) if found else None


class Campaign:
    """What the rungs so far say: nodes named (with their evidence), cleared and still suspected."""

    def __init__(self, slow: float = DEFAULT_SLOW, link: float = DEFAULT_THRESHOLD) -> None:
        self.slow = slow
        self.link = link
        self.named: dict[str, dict[str, Any]] = {}
        self.cleared: set[str] = set()
        # Each slow group's members nobody has cleared yet, with the rungs that made it a suspect.
        self.suspects: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def _name(self, node: str, size: int, kind: str, evidence: str) -> None:
        self.named.setdefault(node, {"node": node, "rung": size, "kind": kind, "evidence": evidence})

    def judge(self, size: int, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Judge rung ``size`` from its groups' ``runs`` (each: ``nodes`` with its head first,
        ``status``, ``iteration_ms``, optionally ``named`` [{node, kind, why}] and ``links``
        {node: {send_gbps, recv_gbps}}); the rung's judgement, the campaign's state updated."""
        before = set(self.named)
        times = {index: positive(run.get("iteration_ms")) for index, run in enumerate(runs)}
        ref = reference(t for index, t in times.items() if t and runs[index].get("status") == "COMPLETED")
        rows: list[dict[str, Any]] = []
        for index, run in enumerate(runs):
            nodes = [str(node) for node in run.get("nodes") or ()]
            if not nodes:
                continue  # a group of no node says nothing of any node
            status = str(run.get("status") or "FAILED")
            time = times[index]
            ratio = round(time / ref, 3) if time and ref else None
            slow = status == "COMPLETED" and ratio is not None and ratio > 1 + self.slow
            rows.append({"nodes": nodes, "status": status, "iteration_ms": time, "ratio": ratio, "slow": slow})
            for item in run.get("named") or ():
                if str(item.get("node")) in nodes:
                    self._name(str(item["node"]), size, str(item.get("kind") or "named"), str(item.get("why") or ""))
            if status in ENDED_BADLY and not any(node in self.named for node in nodes):
                why = f"{status} in a group of {len(nodes)}"
                self.suspects.append({"nodes": nodes, "rungs": [size], "why": why, "kind": status.lower()})
        low = self._links(size, runs)
        # A rung of one completed group (the top rung of a small campaign) has nothing to be compared with.
        compared = sum(row["ratio"] is not None and row["status"] == "COMPLETED" for row in rows) >= 2
        for row in rows:
            if row["slow"] and size == 1:
                node = row["nodes"][0]
                self._name(node, size, "slow_node", f"alone {row['ratio']}x the rung's median iteration ({ref} ms)")
            elif row["slow"]:
                why = f"its group of {size} ran {row['ratio']}x the rung's median iteration ({ref} ms)"
                self.suspects.append({"nodes": list(row["nodes"]), "rungs": [size], "why": why, "kind": "slow_group"})
            elif row["status"] == "COMPLETED" and size >= 2 and compared and row["ratio"] is not None:
                # A node whose own link figures were low is not cleared by its group's pace.
                self.cleared.update(node for node in row["nodes"] if node not in low)
        self._resolve(size)
        return {
            "size": size,
            "reference_ms": ref,
            "groups": rows,
            "named": [self.named[node] for node in self.named if node not in before],
        }

    def _links(self, size: int, runs: Sequence[Mapping[str, Any]]) -> set[str]:
        """Suspect the ends of each slow stream: a node whose link figure in a direction is below
        ``link`` of the rung's median over every node. One stream has two ends (a pair's sender and
        its receiver read the same stream), so a group's sweep alone cannot say which end is slow;
        the rungs after split them (a group of three or more names its node itself, in ``named``)."""
        figures: dict[str, dict[str, float]] = {"send": {}, "recv": {}}
        for run in runs:
            for node, link in (run.get("links") or {}).items():
                for direction, rates in figures.items():
                    rate = positive((link or {}).get(direction + "_gbps"))
                    if rate is not None:
                        rates[str(node)] = rate
        low: dict[str, list[str]] = {}
        for direction, rates in figures.items():
            if len(rates) < 3:  # two figures: no median that the slow one is not half of
                continue
            median = statistics.median(rates.values())
            for node, rate in rates.items():
                if rate < self.link * median:
                    low.setdefault(node, []).append(f"{direction} {rate:g} Gbit/s ({rate / median:.3f}x)")
        for run in runs:
            ends = [str(node) for node in run.get("nodes") or () if str(node) in low]
            if ends and not any(node in self.named for node in run.get("nodes") or ()):
                said = "; ".join(f"{node} {', '.join(low[node])}" for node in ends)
                why = f"slow link in its group's sweep: {said}"
                self.suspects.append({"nodes": ends, "rungs": [size], "why": why, "kind": "slow_link"})
        return set(low)

    def _resolve(self, size: int) -> None:
        """Name the one member of a suspect group left uncleared; keep those with more."""
        kept = []
        for suspect in self.suspects:
            left = [node for node in suspect["nodes"] if node not in self.cleared and node not in self.named]
            if any(node in self.named for node in suspect["nodes"]):
                continue  # explained: one of its members was named
            if len(left) == 1:
                others = [node for node in suspect["nodes"] if node != left[0]]
                cleared = f"; its partners ({', '.join(others)}) were not slow elsewhere" if others else ""
                self._name(left[0], size, str(suspect.get("kind") or "slow_group"), f"{suspect['why']}{cleared}")
            elif not left:
                self.notes.append(
                    f"unexplained: {suspect['why']} ({', '.join(suspect['nodes'])}), every member cleared"
                )
            else:
                kept.append(dict(suspect, nodes=left))
        self.suspects = kept

    def opening(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """Judge the opening run of every node (``run`` as in ``judge``): it names what rung 1 cannot
        see, a node's link (its fabric sweep localises one slow node at any size from 3 nodes, where
        a pair's sweep reads one stream and cannot say which end is slow) and a node that failed the
        run; a node's compute is left to rung 1, where every node runs alone (its figure is then its
        own, not a share of a synchronous step)."""
        before = set(self.named)
        nodes = [str(node) for node in run.get("nodes") or ()]
        left = []
        for item in run.get("named") or ():
            node, kind = str(item.get("node")), str(item.get("kind") or "named")
            if node not in nodes:
                continue
            if kind in RUNG_1_KINDS:
                left.append(node)
                continue
            self._name(node, 0, kind, f"the opening run of every node: {item.get('why') or kind}")
        status = str(run.get("status") or "FAILED")
        if status != "COMPLETED" and set(self.named) == before:
            self.notes.append(f"the opening run of every node ended {status} and named no node")
        return {
            "nodes": len(nodes),
            "status": status,
            "named": [self.named[node] for node in self.named if node not in before],
            "left_to_rung_1": sorted(set(left)),
        }

    def leaving(self, exclude: bool = True) -> list[str]:
        """The nodes that leave the campaign before the next rung: every node named."""
        return list(self.named) if exclude else []


def still_in(nodes: Sequence[str], campaign: Campaign, exclude: bool = True) -> list[str]:
    """The nodes the next rung runs on, in the cluster file's order."""
    gone = set(campaign.leaving(exclude))
    return [node for node in nodes if node not in gone]
