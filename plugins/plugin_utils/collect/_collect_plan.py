# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which nodes' traces come to the controller in full (controller side, pure: no I/O).

Private to this collection. At 1000
nodes x 8 ranks the traces do not fit the controller (1-3 TB), and profiling fewer ranks is not the
way out (ranks that do not profile wait on those that do). So each node analyses its own traces
where they are, and the controller pulls in full only what a person will open: the nodes the
analysis names, the next one after each (its ring neighbour, where a slow link's other end is),
and a few drawn at random with a seed the report states, within a byte budget.

``resolve``: the one reader of aorta_collect_traces and aorta_parse_on_nodes (``'sample' | bool``
is False in Jinja, so no template may read them). ``takes_traces``: whether a node's end streams its
traces. ``order``: the nodes to pull after the report, in priority order, each with why;
``within``: what of that order fits the budget; the rest stay on their nodes, listed in the manifest.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

MODES = ("auto", "all", "sample", "none")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0", "")


class CollectModeError(ValueError):
    """aorta_collect_traces holds a value that is not one of its modes."""


def mode(value: Any, nodes: int, all_max_nodes: int = 16) -> tuple[str, str]:
    """(``all``, ``sample`` or ``none``, why) for aorta_collect_traces ``value`` on ``nodes`` nodes:
    true and false stay all and none (the variable's old values); ``auto`` is all up to
    ``all_max_nodes`` nodes (aorta_collect_all_max_nodes), sample above."""
    if isinstance(value, bool):
        return ("all", "aorta_collect_traces true") if value else ("none", "aorta_collect_traces false")
    text = str(value if value is not None else "").strip().lower()
    if text in _TRUE:
        return "all", "aorta_collect_traces true"
    if text in _FALSE:
        return "none", "aorta_collect_traces false"
    if text not in MODES:
        raise CollectModeError(f"aorta_collect_traces: {value!r} is not one of {', '.join(MODES)} (or true, false)")
    if text != "auto":
        return text, f"aorta_collect_traces {text}"
    if nodes <= all_max_nodes:
        return "all", f"auto: {nodes} nodes, at most aorta_collect_all_max_nodes ({all_max_nodes})"
    return "sample", f"auto: {nodes} nodes, more than aorta_collect_all_max_nodes ({all_max_nodes})"


def resolve(collect_traces: Any, parse_on_nodes: Any, nodes: int, all_max_nodes: int = 16) -> tuple[str, str]:
    """``mode`` with aorta_parse_on_nodes: true there is a documented alias of ``sample`` (each node
    analyses its own traces); with aorta_collect_traces false it stays ``none`` (nothing pulled), as
    the two together meant before the modes."""
    found, why = mode(collect_traces, nodes, all_max_nodes)
    if str(parse_on_nodes).strip().lower() in _TRUE and found == "all":
        return "sample", "aorta_parse_on_nodes true (an alias of aorta_collect_traces sample)"
    return found, why


def of_run(s: Mapping[str, Any], nodes: int) -> tuple[str, str]:
    """``resolve`` from a run's settings ``s`` (aorta_collect_traces, aorta_parse_on_nodes,
    aorta_collect_all_max_nodes) for ``nodes`` nodes: what preflight, the launch and each node's end
    ask alike."""
    return resolve(s["aorta_collect_traces"], s["aorta_parse_on_nodes"], nodes, int(s["aorta_collect_all_max_nodes"]))


def takes_traces(found: str, rank: int) -> bool:
    """Whether a node's end streams its traces: every node with ``all``, the head alone with
    ``sample`` (the rest come after the report, named), none with ``none``."""
    return found == "all" or (found == "sample" and int(rank) == 0)


def summarised(found: str) -> bool:
    """Whether each node analyses its own traces where they are (``sample`` and ``none``)."""
    return found in ("sample", "none")


def seed_of(run_id: str) -> int:
    """The sample's seed, from the run id: the report states it before the pull, and the same run
    draws the same nodes again from the same nodes still on their nodes (after a pull, fewer remain)."""
    return int(hashlib.sha256(str(run_id).encode()).hexdigest()[:8], 16) % 1_000_000


def order(
    nodes: Sequence[str],
    named: Iterable[str],
    sample_nodes: int = 2,
    seed: int = 0,
    drawable: Collection[str] | None = None,
) -> list[dict[str, str]]:
    """The nodes to pull in full, most wanted first, each ``{node, why}``: every node the analysis
    names (slow node, the slow rank's node, a slow link), in the order given; then the next node in
    rank order after each named one (wrapping to the head); then ``sample_nodes`` more drawn from
    the rest with ``seed`` (only from ``drawable`` when given: the nodes whose traces are still to
    come). ``nodes``: every node that ran, in rank order. A name not among them is left out (a node
    excluded before the launch has no trace)."""
    index = {node: i for i, node in enumerate(nodes)}
    picked: list[dict[str, str]] = []
    seen: set[str] = set()

    def add(node: str, why: str) -> None:
        if node not in seen:
            seen.add(node)
            picked.append({"node": node, "why": why})

    named_here = [node for node in dict.fromkeys(named) if node in index]
    for node in named_here:
        add(node, "named by the analysis")
    for node in named_here:
        after = nodes[(index[node] + 1) % len(nodes)]
        add(after, f"the next node after {node}")
    rest = [node for node in nodes if node not in seen and (drawable is None or node in drawable)]
    for node in random.Random(seed).sample(rest, min(max(sample_nodes, 0), len(rest))):
        add(node, f"drawn at random (seed {seed})")
    return picked


def within(
    wanted: Sequence[Mapping[str, str]], sizes: Mapping[str, int], budget_bytes: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pulled, left) of ``wanted`` (``order``'s) in that order while the sum of their ``sizes``
    (pull_plan gives the files' own sizes as the nodes listed them: a bound on the compressed bytes
    on the wire; a node with no size known counts 0) stays within
    ``budget_bytes``. A node that does not fit is left (with why), and smaller ones after it are
    still tried: a budget spent on one huge node should not cost every other one its place."""
    pulled: list[dict[str, Any]] = []
    left: list[dict[str, Any]] = []
    spent = 0
    for item in wanted:
        size = int(sizes.get(item["node"], 0) or 0)
        if spent + size <= budget_bytes:
            spent += size
            pulled.append(dict(item, bytes=size))
        else:
            left.append(dict(item, bytes=size, left=f"over the budget: {spent + size} of {budget_bytes} bytes"))
    return pulled, left


def named_by(report: Mapping[str, Any]) -> list[str]:
    """The nodes the report names, most wanted first: slow nodes, the slow ranks' nodes, slow links
    (each as the report writes it: the node's name or management address)."""
    named = [str(item.get("node")) for item in report.get("slow_nodes") or []]
    named += [str(item.get("node")) for item in report.get("stragglers") or []]
    named += [str(item.get("node")) for item in report.get("slow_links") or []]
    return [node for node in dict.fromkeys(named) if node and node != "None"]


def _kept_bytes(entry: Mapping[str, Any]) -> int:
    return sum(int(row.get("size") or 0) for row in entry.get("files") or [])


def pull_plan(
    manifest: Mapping[str, Any],
    report: Mapping[str, Any],
    sample_nodes: int,
    seed: int,
    budget_bytes: int,
    asked: Sequence[Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """``{pull, left}``: the nodes whose traces the manifest lists ``on_node`` to pull now, each
    ``{node, rank, why, bytes}``. After the report (``asked`` None): ``order`` over every node of the
    manifest (named by ``report``, the next after each, ``sample_nodes`` drawn with ``seed``), kept to
    the nodes still on their node, ``within`` ``budget_bytes`` (the files' sizes as the nodes listed
    them). Asked by name or rank (playbooks/trace_collect.yml): those nodes, no budget; a name the
    manifest does not hold is left with why."""
    entries = sorted(manifest.get("nodes") or [], key=lambda entry: int(entry["rank"]))
    by_key: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        for key in (entry.get("name"), entry.get("mgmt_ip"), entry.get("rank")):
            if key is not None:
                by_key.setdefault(str(key), entry)
    if asked is not None:
        pull, left = [], []
        for key in dict.fromkeys(str(item) for item in asked):
            entry = by_key.get(key)
            if entry is None:
                left.append({"node": key, "left": "not a node of this run's manifest"})
            elif entry.get("collected"):
                left.append({"node": str(entry["name"]), "left": "already in combined_traces"})
            elif not entry.get("on_node"):
                why = f"not collected ({entry.get('error') or 'no error recorded'}) and not listed on its node"
                left.append({"node": str(entry["name"]), "left": f"{why}: collect the run again (trace_collect.yml)"})
            else:
                pull.append(
                    {"node": str(entry["name"]), "rank": entry["rank"], "why": "asked", "bytes": _kept_bytes(entry)}
                )
        return {"pull": pull, "left": left}
    names = [str(entry["name"]) for entry in entries]
    named = [str(by_key[key]["name"]) for key in named_by(report) if key in by_key]
    kept = {str(entry["name"]): entry for entry in entries if entry.get("on_node")}
    wanted = [item for item in order(names, named, sample_nodes, seed, drawable=kept) if item["node"] in kept]
    pulled, left = within(wanted, {name: _kept_bytes(entry) for name, entry in kept.items()}, budget_bytes)
    for item in pulled + left:
        item["rank"] = kept[item["node"]]["rank"]
    return {"pull": pulled, "left": left}
