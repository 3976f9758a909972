# SPDX-License-Identifier: GPL-3.0-or-later
"""A campaign's figures from its groups' own results: the sample run.json read as a group, the
nodes a run names, and a rung's throughput, efficiency, slowest group and spread."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _figures

REPO = Path(__file__).resolve().parents[5]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
REPORT = {"performance": {"avg_step_time_ms": 71.5}, "run": {"samples_per_second": 224.0}}


def test_a_groups_run_json_and_report_are_what_the_campaign_judges():
    found = _figures.group_run(SAMPLE, REPORT, "k2/g0")
    names = [row["name"] for row in sorted(SAMPLE["nodes"], key=lambda row: row["rank"])]
    assert found["nodes"] == names and found["status"] == "COMPLETED" and found["dir"] == "k2/g0"
    assert (found["iteration_ms"], found["samples_per_second"], found["named"]) == (71.5, 224.0, [])
    head = SAMPLE["nodes"][0]
    assert found["links"][head["name"]] == {
        "send_gbps": head["fabric_sweep"]["send_gbps"],
        "recv_gbps": head["fabric_sweep"]["recv_gbps"],
    }


def test_the_nodes_a_run_named_come_with_their_kind_and_why():
    record = copy.deepcopy(SAMPLE)
    # Every node not ok is in failed_nodes (a rank that only lost its peer too): the first is named.
    record.update(status="FAILED", failed_nodes=["b", "a"], first_failure="b", message="b: not reached")
    record["fabric_sweep"]["slow"] = [{"node": "c", "direction": "send", "ratio": 0.1}]
    report = {"slow_nodes": [{"node": "d"}], "stragglers": [{"rank": 5, "node": "e"}]}
    assert _figures.named_nodes(record, report) == [
        {"node": "b", "kind": "failed", "why": "b: not reached"},
        {"node": "c", "kind": "slow_link", "why": "fabric sweep: send 0.1x its run's median"},
        {"node": "d", "kind": "slow_node", "why": "its run's report: a slow node"},
        {"node": "e", "kind": "straggler", "why": "its run's report: rank 5 a straggler"},
    ]
    # A run with no report (it failed before any trace): its record alone; no figure of speed.
    found = _figures.group_run(record, None)
    assert found["iteration_ms"] is None and [n["node"] for n in found["named"]] == ["b", "c"]


def test_every_node_is_named_only_where_each_failed_its_own_check_for_one_reason():
    record = {"status": "FAILED", "failed_nodes": ["a", "b"], "first_failure": "a"}
    record["message"] = "every node: preflight[image]: x is not on the node"
    assert [n["node"] for n in _figures.named_nodes(record, None)] == ["a", "b"]
    # A timeout names the laggard the run put first, not every node that waited for it.
    record = {"status": "TIMEOUT", "failed_nodes": ["c", "a", "b"], "first_failure": "c", "message": "TIMEOUT on 3"}
    assert _figures.named_nodes(record, None) == [{"node": "c", "kind": "timeout", "why": "TIMEOUT on 3"}]


def test_a_rungs_figures():
    runs = [
        {"nodes": ["a", "b"], "status": "COMPLETED", "iteration_ms": 100.0, "samples_per_second": 180.0},
        {"nodes": ["c", "d"], "status": "COMPLETED", "iteration_ms": 125.0, "samples_per_second": 144.0},
        {"nodes": ["e", "f"], "status": "COMPLETED", "iteration_ms": 110.0, "samples_per_second": 160.0},
        {"nodes": ["g", "h"], "status": "FAILED", "iteration_ms": None, "samples_per_second": None},
    ]
    found = _figures.rung_figures(2, runs, alone=100.0, left_out=["i"])
    assert found == {
        "size": 2,
        "group_count": 4,
        "completed": 3,
        "left_out": ["i"],
        "median_iteration_ms": 110.0,
        "samples_per_second_per_node": 80.0,
        "efficiency": 0.8,
        "slowest_group": ["c", "d"],
        "spread": 1.25,
    }
    # One group: no slowest, no spread; no rung 1 figure: no efficiency.
    one = _figures.rung_figures(8, runs[:1], alone=None)
    assert (one["slowest_group"], one["spread"], one["efficiency"]) == (None, None, None)
