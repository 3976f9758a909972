# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The campaign from its first rung to its last, with scripted group runs (as kubernetes.core tests
its waiter): which rungs run on which nodes, a named node leaving before the next rung, a stop
request, and the one console line per rung."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _ladder, _rungs

BASE_MS = 100.0


def scripted(slow=(), failing=(), link=(), calls=None):
    """run_groups whose group iterates at BASE_MS x its slowest member's factor (``slow``:
    {node: factor}), its report naming that node when the group has two or more (a straggler); a
    group holding a node of ``failing`` ends FAILED naming it; a group of 3 or more holding a node of
    ``link`` names it from its sweep (a pair's sweep cannot: both ends read the one stream low)."""
    factors = dict(slow)

    def run_groups(label, groups):
        if calls is not None:
            calls.append((label, [list(g) for g in groups]))
        runs = []
        for number, group in enumerate(groups):
            bad = [node for node in group if node in failing]
            ms = BASE_MS * max(factors.get(node, 1.0) for node in group)
            named = [{"node": n, "kind": "failed", "why": "its run failed"} for n in bad]
            if len(group) >= 2:
                named += [{"node": n, "kind": "slow_node", "why": "a slow node"} for n in group if n in factors]
            if len(group) >= 3:
                named += [{"node": n, "kind": "slow_link", "why": "fabric sweep"} for n in group if n in link]
            runs.append(
                {
                    "nodes": list(group),
                    "run_id": f"c-{label}-g{number}",
                    "dir": f"{label}/g{number}",
                    "status": "FAILED" if bad else "COMPLETED",
                    "iteration_ms": None if bad else ms,
                    "samples_per_second": None if bad else 1000.0 * len(group) * BASE_MS / ms,
                    "named": named,
                    "links": {},
                }
            )
        return runs

    return run_groups


def sizes(calls):
    """The rungs' group sizes, the opening left out."""
    return [len(groups[0]) for label, groups in calls if label != "opening"]


NODES = [f"n{i}" for i in range(8)]


def test_a_healthy_campaign_runs_every_rung_on_every_node_and_names_nobody():
    calls, lines = [], []
    document = _rungs.campaign("c", NODES, {"aorta_scaling_seed": 3}, scripted(calls=calls), said=lines.append)
    assert calls[0] == ("opening", [NODES]) and sizes(calls) == [1, 2, 4, 8]
    for label, groups in calls[1:]:
        size = int(label[1:])
        assert sorted(n for g in groups for n in g) == NODES and all(len(g) == size for g in groups)
    # Two nodes that shared a group share none at the next rung (groups of one size throughout).
    assert [r["shared_pairs"] for r in document["rungs"]] == [
        None,
        0,
        0,
        2 * 6,
    ]  # the top rung holds all: both fours' pairs
    assert document["verdict"] == {"verdict": "PASS", "reasons": []}
    assert document["named"] == [] and document["left"] == NODES and document["stopped"] is False
    assert [r["efficiency"] for r in document["rungs"]] == [1.0, 1.0, 1.0, 1.0]
    assert document["seed"] == 3 and document["rungs"][0]["groups"][0]["dir"].startswith("k1/")
    assert document["opening"] == {
        "nodes": 8,
        "status": "COMPLETED",
        "named": [],
        "left_to_rung_1": [],
        "dir": "opening/g0",
        "run_id": "c-opening-g0",
    }
    assert len(lines) == 5 and lines[0] == "opening run of every node (8): COMPLETED; named nobody"
    assert lines[1].startswith("rung 1: 8 of 8 groups completed on 8 nodes")


def test_a_slow_node_is_named_at_rung_1_and_the_higher_rungs_run_without_it():
    calls = []
    document = _rungs.campaign("c", NODES, {"aorta_scaling_seed": 1}, scripted(slow={"n5": 1.6}, calls=calls))
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [("n5", 1, "slow_node")]
    assert "alone 1.6x the rung's median iteration" in document["named"][0]["evidence"]
    # The opening's report named n5 slow: its compute is left to rung 1, where it runs alone.
    assert document["opening"]["named"] == [] and document["opening"]["left_to_rung_1"] == ["n5"]
    later = [n for _label, groups in calls[2:] for g in groups for n in g]
    assert "n5" not in later
    # 7 nodes left: pairs (one sits out), fours (three sit out), then the top rung on all seven.
    assert sizes(calls) == [1, 2, 4, 7]
    assert document["rungs"][1]["left_out"] and len(document["rungs"][1]["left_out"]) == 1
    assert document["left"] == [n for n in NODES if n != "n5"]
    assert document["verdict"]["verdict"] == "FAIL" and document["verdict"]["reasons"] == ["named 1 node: n5"]


def test_with_exclusion_off_every_rung_keeps_every_node():
    calls = []
    settings = {"aorta_scaling_exclude": False, "aorta_scaling_seed": 1}
    document = _rungs.campaign("c", NODES, settings, scripted(slow={"n5": 1.6}, calls=calls))
    assert sizes(calls) == [1, 2, 4, 8]
    assert [e["node"] for e in document["named"]] == ["n5"] and document["left"] == NODES


def test_a_group_that_failed_fails_the_campaign_and_its_node_leaves():
    calls = []
    document = _rungs.campaign("c", NODES[:4], {"aorta_scaling_seed": 2}, scripted(failing={"n2"}, calls=calls))
    # The opening run of every node failed, naming n2: it runs in no rung.
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [("n2", 0, "failed")]
    assert all("n2" not in g for _label, groups in calls[1:] for g in groups)
    assert sizes(calls) == [1, 2, 3]
    reasons = document["verdict"]["reasons"]
    assert reasons == ["named 1 node: n2"]  # the opening is not a rung: its group is not counted again


def test_the_sizes_given_run_as_given_with_no_efficiency_without_rung_1():
    calls = []
    settings = {"aorta_scaling_sizes": [4, 2], "aorta_scaling_seed": 0, "aorta_scaling_opening": False}
    document = _rungs.campaign("c", NODES, settings, scripted(calls=calls))
    assert [label for label, _groups in calls] == ["k2", "k4"] and document["opening"] is None
    assert [r["efficiency"] for r in document["rungs"]] == [None, None]
    with pytest.raises(_ladder.LadderError, match="aorta_scaling_sizes: 9 is not a group size from 1 to 8"):
        _rungs.campaign("c", NODES, {"aorta_scaling_sizes": [9]}, scripted())


def test_after_a_stop_request_no_further_rung_starts():
    calls = []
    document = _rungs.campaign("c", NODES, {}, scripted(calls=calls), stopped=lambda: len(calls) > 1)
    assert [label for label, _groups in calls] == ["opening", "k1"]
    # The rung the stop interrupted is not judged: its stopped groups are no evidence against a node.
    assert document["rungs"] == [] and document["named"] == [] and document["stopped"] is True
    assert document["stopped_by"] == "Ctrl-C"
    assert document["notes"] == ["rung 1 was stopped: not judged"]
    assert document["verdict"] == {"verdict": "FAIL", "reasons": ["stopped (Ctrl-C) after 0 rungs: not every rung ran"]}


def test_a_group_run_stopped_from_outside_ends_the_campaign_and_names_nobody():
    """aorta.cluster.stop by the campaign's id (or one group's): the campaign's own Ctrl-C never came,
    but a rung with a STOPPED group is not judged and no further rung starts."""
    calls = []
    inner = scripted(calls=calls)

    def run_groups(label, groups):
        runs = inner(label, groups)
        if label == "k2":
            runs[1] = dict(runs[1], status="STOPPED", iteration_ms=None, samples_per_second=None)
        return runs

    document = _rungs.campaign("c", NODES, {}, run_groups)
    assert [label for label, _groups in calls] == ["opening", "k1", "k2"]
    assert [r["size"] for r in document["rungs"]] == [1] and document["named"] == []
    assert document["stopped"] is True and document["stopped_by"] == "aorta.cluster.stop of c-k2-g1"
    assert document["notes"] == ["rung 2 was stopped: not judged"]
    reasons = document["verdict"]["reasons"]
    assert reasons == ["stopped (aorta.cluster.stop of c-k2-g1) after 1 rung: not every rung ran"]

    # The stop named group 2 (its nodes refused it: the campaign's stop left on them); the campaign
    # then stopped group 0 itself: the record names the one the operator stopped.
    def refused(label, groups):
        runs = inner(label, groups)
        if label == "k2":
            runs[0] = dict(runs[0], status="STOPPED")
            runs[2] = dict(runs[2], status="FAILED", stopped_from_outside=True)
        return runs

    again = _rungs.campaign("c", NODES, {}, refused)
    assert again["stopped_by"] == "aorta.cluster.stop of c-k2-g2" and again["named"] == []


def test_a_slow_link_is_named_by_the_opening_run_and_no_rung_runs_it():
    """Four nodes, one link slow: rung 2's pair would read the stream low at both ends, so only a sweep
    of three or more can put it on one node; the opening's does, before rung 1."""
    calls = []
    document = _rungs.campaign("c", NODES[:4], {"aorta_scaling_seed": 5}, scripted(link={"n1"}, calls=calls))
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [("n1", 0, "slow_link")]
    assert document["named"][0]["evidence"] == "the opening run of every node: fabric sweep"
    assert all("n1" not in g for _label, groups in calls[1:] for g in groups) and sizes(calls) == [1, 2, 3]


def test_two_nodes_have_no_opening_run():
    calls = []
    document = _rungs.campaign("c", NODES[:2], {}, scripted(calls=calls))
    assert [label for label, _groups in calls] == ["k1", "k2"] and document["opening"] is None


def test_a_stopped_group_is_no_evidence_against_its_nodes():
    calls = []

    def stopped_groups(label, groups):
        runs = scripted(calls=calls)(label, groups)
        return [dict(run, status="STOPPED", iteration_ms=None) if label == "k1" else run for run in runs]

    document = _rungs.campaign("c", NODES[:4], {"aorta_scaling_opening": False}, stopped_groups)
    assert document["named"] == [] and document["suspects"] == []


def test_a_top_rung_that_shrank_to_a_size_run_before_gets_a_directory_of_its_own():
    """8 nodes: rung 4's two groups each name three of their nodes, 2 are left; the top rung then runs
    at 2, a size rung 2 ran at: in k2-rung3, not over rung 2's k2 (its run.json would be read again)."""
    calls = []
    healthy = scripted(calls=calls)

    def named_at_4(label, groups):
        runs = healthy(label, groups)
        if label == "k4":
            for run in runs:
                run["named"] = [{"node": n, "kind": "slow_node", "why": "x"} for n in run["nodes"][1:]]
        return runs

    document = _rungs.campaign("c", NODES, {"aorta_scaling_opening": False, "aorta_scaling_seed": 1}, named_at_4)
    assert [label for label, _groups in calls] == ["k1", "k2", "k4", "k2-rung3"]
    assert document["rungs"][-1]["groups"][0]["dir"] == "k2-rung3/g0"


def test_a_rung_line_stays_bounded_at_1000_named_nodes():
    rung = {
        "size": 1,
        "completed": 1000,
        "group_count": 1000,
        "median_iteration_ms": 100.0,
        "efficiency": 1.0,
        "left_out": [],
        "named": [{"node": f"node-{i:04d}.example"} for i in range(1000)],
    }
    line = _rungs.rung_line(rung, 1000)
    assert len(line) < 300 and line.endswith("and 995 more") and "node-0000.example" in line


def test_without_the_opening_a_group_that_failed_is_named_at_its_rung():
    calls = []
    settings = {"aorta_scaling_seed": 2, "aorta_scaling_opening": False}
    document = _rungs.campaign("c", NODES[:4], settings, scripted(failing={"n2"}, calls=calls))
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [("n2", 1, "failed")]
    reasons = document["verdict"]["reasons"]
    assert reasons[0] == "named 1 node: n2" and reasons[1].startswith("1 group did not complete: k1: n2 FAILED")


def test_the_docs_arithmetic_of_a_campaigns_waves_holds():
    """docs/scaling.md's table: the groups and the waves of runs at 8, 100 and 1000 nodes."""
    doc = (Path(__file__).resolve().parents[5] / "docs" / "scaling.md").read_text()
    rows = re.findall(r"^\| (\d+) \| opening[^|]*\| 1 \+ (\d+) \| ([^|]*) \| [^|]* \| (\d+)", doc, re.M)
    assert [int(n) for n, *_rest in rows] == [8, 100, 1000]
    for nodes, groups, waves, at_once in rows:
        sizes = _ladder.sizes(int(nodes))
        counts = [int(nodes) // k for k in sizes]
        assert sum(counts) == int(groups)
        assert int(waves.split("=")[-1]) == 1 + sum(math.ceil(c / 16) for c in counts)
        assert int(at_once) == 1 + len(sizes)


def test_the_docs_campaign_json_table_names_every_key_the_campaign_writes():
    """docs/scaling.md's campaign.json table against the document the loop returns (the action adds
    the two times)."""
    doc = (Path(__file__).resolve().parents[5] / "docs" / "scaling.md").read_text()
    table = doc.split("`campaign.json`:\n", 1)[1].split("\n\n", 1)[0]
    documented = {
        name for cell in re.findall(r"^\| ([^|]+) \|", table, re.M) for name in re.findall(r"`(\w+)(?:\[\])?`", cell)
    }
    written = set(_rungs.campaign("c", NODES[:4], {}, scripted())) | {"started_epoch", "finished_epoch"}
    assert documented == written
