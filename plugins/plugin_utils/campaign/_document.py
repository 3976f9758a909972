# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scaling campaign's record (controller side, pure): campaign.json's document, its verdict and
its junit.xml testcases, each from the rungs as _localise judged them and _figures measured them.

The verdict follows the run's rule (docs/results.md, "The verdict"): a finding fails it as a
threshold does. A campaign FAILs when it named a node, when a group's run did not complete, when a
slow group could not be put on one node, or (``aorta_scaling_min_efficiency``) when a rung's
weak-scaling efficiency is below the bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names, plural

VERSION = 1
# Names shown in a line before "and N more" (the console's rule for 1000 nodes: one bounded line).
SHOWN = 5


def rung_entry(
    judged: Mapping[str, Any], figures: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """campaign.json's entry of one rung: its figures (_figures.rung_figures), its reference and
    the nodes it named (_localise's judgement), and each group as judged with where its results
    are, its run id and its throughput per node (``runs``: _figures.group_run, in the same order)."""
    groups = []
    for row, run in zip(judged.get("groups") or (), runs, strict=True):
        samples, count = run.get("samples_per_second"), len(run.get("nodes") or ())
        per_node = round(samples / count, 3) if samples and count else None
        groups.append(dict(row, dir=run.get("dir"), run_id=run.get("run_id"), samples_per_second_per_node=per_node))
    return {
        **figures,
        "reference_ms": judged.get("reference_ms"),
        "named": list(judged.get("named") or ()),
        "groups": groups,
    }


def verdict(
    rungs: Sequence[Mapping[str, Any]],
    named: Sequence[Mapping[str, Any]],
    suspects: Sequence[Mapping[str, Any]],
    min_efficiency: float | None = None,
    opening: Mapping[str, Any] | None = None,
    stopped: str = "",
) -> dict[str, Any]:
    """``{verdict, reasons}``: PASS, or FAIL with one reason per kind of trouble, each naming what
    (``stopped``: what stopped the campaign, _rungs.stopped_by)."""
    reasons = []
    if stopped:
        reasons.append(f"stopped ({stopped}) after {plural(len(rungs), 'rung')}: not every rung ran")
    if opening and opening.get("status") != "COMPLETED" and not opening.get("named"):
        reasons.append(f"the opening run of every node ended {opening.get('status')} naming no node")
    if named:
        nodes = [str(entry["node"]) for entry in named]
        reasons.append(f"named {plural(len(nodes), 'node')}: {first_names(nodes, SHOWN)}")
    failed = [
        f"k{rung['size']}: {first_names(group['nodes'], SHOWN)} {group['status']}"
        for rung in rungs
        for group in rung.get("groups") or ()
        if group.get("status") != "COMPLETED"
    ]
    if failed:
        reasons.append(f"{plural(len(failed), 'group')} did not complete: {first_names(failed, SHOWN)}")
    if suspects:
        open_ = [first_names(s["nodes"], SHOWN, sep=" or ") for s in suspects]
        reasons.append(f"slow, not put on one node: {first_names(open_, SHOWN)}")
    if min_efficiency is not None:
        low = [r for r in rungs if r.get("efficiency") is not None and r["efficiency"] < min_efficiency]
        if low:
            said = ", ".join(f"k{r['size']} {r['efficiency']}" for r in low)
            reasons.append(f"weak-scaling efficiency below {min_efficiency} (aorta_scaling_min_efficiency): {said}")
    return {"verdict": "FAIL" if reasons else "PASS", "reasons": reasons}


def document(
    campaign_id: str,
    nodes: Sequence[str],
    seed: int,
    settings: Mapping[str, Any],
    rungs: Sequence[Mapping[str, Any]],
    judge: Any,
    opening: Mapping[str, Any] | None = None,
    stopped: str = "",
) -> dict[str, Any]:
    """campaign.json: who, how it was grouped (the seed replays it), each rung's figures and groups,
    the nodes named with their evidence, what stayed unresolved, and the verdict."""
    named = list(judge.named.values())
    return {
        "version": VERSION,
        "campaign_id": campaign_id,
        "seed": seed,
        "nodes": list(nodes),
        "settings": dict(settings),
        "opening": dict(opening) if opening else None,
        "rungs": list(rungs),
        "named": named,
        "suspects": list(judge.suspects),
        "notes": list(judge.notes),
        "stopped": bool(stopped),
        "stopped_by": stopped or None,
        "verdict": verdict(
            rungs, named, judge.suspects, settings.get("aorta_scaling_min_efficiency"), opening, stopped
        ),
    }


def cases(campaign: Mapping[str, Any]) -> list[dict[str, str]]:
    """junit.xml's testcases: the opening run of every node (failed when it did not complete), one
    per rung (failed by a group that did not complete or an efficiency below the bound), one per
    node named (failed, with its evidence), one per unresolved suspicion."""
    found = []
    opening = campaign.get("opening")
    if opening:
        failure = "" if opening.get("status") == "COMPLETED" else f"ended {opening.get('status')}"
        found.append({"classname": "aorta.scaling", "name": f"opening: {opening['nodes']} nodes", "failure": failure})
    bound = (campaign.get("settings") or {}).get("aorta_scaling_min_efficiency")
    for rung in campaign.get("rungs") or ():
        name = f"rung {rung['size']}: {plural(len(rung.get('groups') or ()), 'group')}"
        bad = [g for g in rung.get("groups") or () if g.get("status") != "COMPLETED"]
        message = ""
        if bad:
            message = "; ".join(f"{', '.join(g['nodes'])} {g['status']}" for g in bad)
        elif bound is not None and rung.get("efficiency") is not None and rung["efficiency"] < bound:
            message = f"efficiency {rung['efficiency']} below {bound}"
        found.append({"classname": "aorta.scaling", "name": name, "failure": message})
    for entry in campaign.get("named") or ():
        name = f"node {entry['node']}"
        found.append({"classname": "aorta.scaling", "name": name, "failure": f"{entry['kind']}: {entry['evidence']}"})
    for suspect in campaign.get("suspects") or ():
        name = f"one of {', '.join(suspect['nodes'])}"
        found.append({"classname": "aorta.scaling", "name": name, "failure": str(suspect["why"])})
    return found
