# SPDX-License-Identifier: GPL-3.0-or-later
"""campaign.json's document: its verdict (a named node, a group that did not complete, a slow group not
put on one node and an efficiency below the bound each FAIL it, naming what), campaign.json's
document and the junit testcases, from a campaign simulated on 8 nodes with one slow node."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _document as cr
from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _localise


def rung(size, *groups):
    return {"size": size, "groups": [{"nodes": list(g), "status": s} for g, s in groups], "efficiency": None}


def test_a_healthy_campaign_passes():
    rungs = [rung(1, ("a", "COMPLETED"), ("b", "COMPLETED")), rung(2, ("ab", "COMPLETED"))]
    assert cr.verdict(rungs, [], []) == {"verdict": "PASS", "reasons": []}


def test_each_kind_of_trouble_fails_the_verdict_naming_what():
    rungs = [rung(2, ("ab", "COMPLETED"), ("cd", "TIMEOUT")), dict(rung(4, ("abcd", "COMPLETED")), efficiency=0.61)]
    named = [{"node": "c", "rung": 2, "kind": "timeout", "evidence": "c: no heartbeat"}]
    suspects = [{"nodes": ["e", "f"], "rungs": [2], "why": "its group of 2 ran 1.3x"}]
    found = cr.verdict(rungs, named, suspects, min_efficiency=0.7)
    assert found == {
        "verdict": "FAIL",
        "reasons": [
            "named 1 node: c",
            "1 group did not complete: k2: c, d TIMEOUT",
            "slow, not put on one node: e or f",
            "weak-scaling efficiency below 0.7 (aorta_scaling_min_efficiency): k4 0.61",
        ],
    }
    # Without the bound the efficiency says nothing of the verdict.
    assert len(cr.verdict(rungs, named, suspects)["reasons"]) == 3


def test_a_thousand_named_nodes_are_one_bounded_reason():
    named = [{"node": f"n{i:04d}"} for i in range(1000)]
    (reason,) = cr.verdict([], named, [])["reasons"]
    assert reason == "named 1000 nodes: n0000, n0001, n0002, n0003, n0004 and 995 more"


def test_the_document_and_the_junit_cases_agree_with_the_judge():
    judge = _localise.Campaign()
    first = judge.judge(
        1,
        [
            {"nodes": [n], "status": "COMPLETED", "iteration_ms": t}
            for n, t in zip("abcd", (100, 101, 160, 99), strict=True)
        ],
    )
    second = judge.judge(
        2,
        [
            {"nodes": ["a", "b"], "status": "COMPLETED", "iteration_ms": 100.0},
            {"nodes": ["d"], "status": "COMPLETED", "iteration_ms": 100.0},
        ],
    )
    doc = cr.document("camp-1", list("abcd"), 7, {"aorta_scaling_min_efficiency": None}, [first, second], judge)
    assert (doc["version"], doc["campaign_id"], doc["seed"], doc["nodes"]) == (1, "camp-1", 7, list("abcd"))
    assert [e["node"] for e in doc["named"]] == ["c"] and doc["verdict"]["verdict"] == "FAIL"
    found = cr.cases(doc)
    assert [(c["name"], c["failure"]) for c in found][:2] == [("rung 1: 4 groups", ""), ("rung 2: 2 groups", "")]
    (node,) = [c for c in found if c["name"] == "node c"]
    assert node["failure"].startswith("slow_node: alone 1.6") and node["classname"] == "aorta.scaling"


def test_a_failed_group_of_1000_nodes_is_one_bounded_reason():
    group = [f"n{i:04d}" for i in range(1000)]
    rungs = [rung(1000, (group, "TIMEOUT"))]
    suspects = [{"nodes": group, "why": "slow"}]
    reasons = cr.verdict(rungs, [], suspects)["reasons"]
    assert reasons[0] == "1 group did not complete: k1000: n0000, n0001, n0002, n0003, n0004 and 995 more TIMEOUT"
    assert reasons[1] == "slow, not put on one node: n0000 or n0001 or n0002 or n0003 or n0004 and 995 more"


def test_the_opening_run_is_a_case_of_its_own_failed_when_it_did_not_complete():
    ended = {"opening": {"nodes": 4, "status": "TIMEOUT", "named": []}, "rungs": [], "named": [], "suspects": []}
    assert cr.cases(ended)[0] == {"classname": "aorta.scaling", "name": "opening: 4 nodes", "failure": "ended TIMEOUT"}
    ended["opening"]["status"] = "COMPLETED"
    assert cr.cases(ended)[0]["failure"] == ""
    assert cr.cases({"opening": None, "rungs": []}) == []
