# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scaling campaign from its first rung to its last (controller side): which rungs run, each
rung's groups (_ladder), the groups' runs (``run_groups``, given: a child ansible-playbook per
group in the action, scripted figures in the unit tests), the judgement (_localise), the figures
(_figures) and campaign.json (_document).

Pure but for ``run_groups``, as kubernetes.core's waiter is: the loop is tested in-process with
scripted runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import OPENING
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names, plural
from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _document, _figures, _ladder, _localise

# run_groups(label, groups) -> each group's run (_figures.group_run), in the groups' order; the label
# names the rung's directory: "opening" (every node, once) or "k<size>".
RunGroups = Callable[[str, list[list[str]]], list[dict[str, Any]]]
# The fewest nodes whose opening sweep can put a slow link on one node (_sweep: n >= 3).
OPENING_NODES = 3


def campaign(
    campaign_id: str,
    nodes: Sequence[str],
    settings: Mapping[str, Any],
    run_groups: RunGroups,
    stopped: Callable[[], bool] = lambda: False,
    said: Callable[[str], Any] = lambda line: None,
) -> dict[str, Any]:
    """Run the opening run of every node (aorta_scaling_opening, from 3 nodes), then every rung,
    and return campaign.json's document. ``settings``: aorta_scaling_sizes (None: 1, 2, 4, ... and
    every node left), aorta_scaling_seed, aorta_scaling_exclude, aorta_scaling_min_efficiency,
    aorta_scaling_opening. A rung is skipped when fewer nodes are left than its size or it
    would repeat the rung before; after a stop request, or once a group's run was stopped, no further
    rung starts. ``said`` gets one
    line per rung (bounded whatever the node count)."""
    given = settings.get("aorta_scaling_sizes")
    seed = int(settings.get("aorta_scaling_seed") or 0)
    exclude = bool(settings.get("aorta_scaling_exclude", True))
    sizes = _ladder.sizes(len(nodes), given)
    judge = _localise.Campaign()
    rungs: list[dict[str, Any]] = []
    previous: list[list[str]] = []
    previous_size: int | None = None
    alone: float | None = None
    opening = None
    how = ""  # what stopped the campaign: its own Ctrl-C, or a stop of a group run (aorta.cluster.stop)
    if settings.get("aorta_scaling_opening", True) and len(nodes) >= OPENING_NODES and not stopped():
        run = run_groups(OPENING, [list(nodes)])[0]
        how = stopped_by(stopped, [run])
        if how:  # stopped part-way: no evidence against a node
            judge.notes.append("the opening run was stopped: not judged")
        else:
            opening = dict(judge.opening(run), dir=run.get("dir"), run_id=run.get("run_id"))
            said(opening_line(opening))
    used: set[str] = set()
    for index, size in enumerate(sizes):
        how = how or stopped_by(stopped, [])
        if how:
            break
        present = _localise.still_in(nodes, judge, exclude)
        k = _ladder.rung_size(size, len(present), sizes[-1], stretch=given is None, previous=previous_size)
        if k is None:
            continue
        made, left_out = _ladder.groups(present, k, previous, seed, index)
        # A directory per rung: the top rung may shrink to a size run before (nodes left after rung 2).
        label = f"k{k}" if f"k{k}" not in used else f"k{k}-rung{index}"
        used.add(label)
        runs = run_groups(label, made)
        how = stopped_by(stopped, runs)
        if how:
            judge.notes.append(f"rung {k} was stopped: not judged")
            break
        judged = judge.judge(k, runs)
        if k == 1:
            alone = _figures.rung_figures(k, runs, None)["samples_per_second_per_node"]
        figures = _figures.rung_figures(k, runs, alone, left_out)
        entry = _document.rung_entry(judged, figures, runs)
        entry["shared_pairs"] = _ladder.shared_pairs(previous, made) if previous else None
        rungs.append(entry)
        said(rung_line(entry, len(present)))
        previous, previous_size = made, k
    document = _document.document(campaign_id, nodes, seed, settings, rungs, judge, opening, how)
    document["left"] = _localise.still_in(nodes, judge, exclude)
    return document


def stopped_by(stopped: Callable[[], bool], runs: Sequence[Mapping[str, Any]]) -> str:
    """What stopped the campaign, or '': its own Ctrl-C, SIGTERM or AWX cancel (``stopped``), or a
    group run stopped from outside (aorta.cluster.stop by the group's or the campaign's id): a rung
    with a group stopped cannot be judged whole, and the operator asked for the nodes back."""
    if stopped():
        return "Ctrl-C"
    # The group the stop named first; the others were stopped by the campaign in turn (their Ctrl-C).
    outside = [str(run.get("run_id")) for run in runs if run.get("stopped_from_outside")]
    held = outside or [str(run.get("run_id")) for run in runs if run.get("status") == "STOPPED"]
    return f"aorta.cluster.stop of {held[0]}" if held else ""


def opening_line(opening: Mapping[str, Any]) -> str:
    """The console's one line for the opening run: its status and the nodes it named."""
    named = [str(entry["node"]) for entry in opening.get("named") or ()]
    line = f"opening run of every node ({opening['nodes']}): {opening['status']}"
    return line + (f"; named {first_names(named, _document.SHOWN)}" if named else "; named nobody")


def rung_line(rung: Mapping[str, Any], present: int) -> str:
    """The console's one line for a rung: its size, groups, completed, efficiency and what it named."""
    named = [str(entry["node"]) for entry in rung.get("named") or ()]
    groups = plural(rung["group_count"], "group")
    parts = [
        f"rung {rung['size']}: {rung['completed']} of {groups} completed on {present} nodes",
        f"median iteration {rung.get('median_iteration_ms')} ms",
    ]
    if rung.get("efficiency") is not None:
        parts.append(f"efficiency {rung['efficiency']}")
    if rung.get("left_out"):
        parts.append(f"{len(rung['left_out'])} sat out")
    if named:
        parts.append(f"named {first_names(named, _document.SHOWN)}")
    return "; ".join(parts)
