# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which nodes' traces come in full: the mode, the order, the budget."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan as cp

NODES = [f"n{i}" for i in range(10)]


@pytest.mark.parametrize(
    ("value", "nodes", "want"),
    [
        (True, 1000, "all"),
        (False, 2, "none"),
        ("true", 1000, "all"),
        ("False", 2, "none"),
        ("auto", 16, "all"),
        ("auto", 17, "sample"),
        ("sample", 2, "sample"),
        ("ALL", 1000, "all"),
        ("none", 2, "none"),
    ],
)
def test_the_one_reader_of_aorta_collect_traces(value, nodes, want):
    assert cp.mode(value, nodes)[0] == want


def test_auto_says_why_and_a_bad_value_names_the_variable():
    assert cp.mode("auto", 17, 16)[1] == "auto: 17 nodes, more than aorta_collect_all_max_nodes (16)"
    with pytest.raises(cp.CollectModeError, match=r"^aorta_collect_traces: 'some' is not one of auto, all"):
        cp.mode("some", 3)


def test_the_named_nodes_come_first_then_the_next_after_each_then_a_seeded_sample():
    picked = cp.order(NODES, ["n4", "n9", "n4", "gone"], sample_nodes=2, seed=7)
    assert [p["node"] for p in picked[:4]] == ["n4", "n9", "n5", "n0"]  # n9's next wraps to the head
    assert [p["why"] for p in picked[:3]] == [
        "named by the analysis",
        "named by the analysis",
        "the next node after n4",
    ]
    drawn = [p["node"] for p in picked[4:]]
    assert len(drawn) == 2 and not set(drawn) & {"n4", "n9", "n5", "n0"}
    assert [p["node"] for p in cp.order(NODES, ["n4", "n9"], 2, seed=7)] == [p["node"] for p in picked]  # reproducible
    assert all(p["why"] == "drawn at random (seed 7)" for p in picked[4:])


def test_the_next_of_a_named_node_already_named_is_not_listed_twice_and_the_sample_is_bounded():
    picked = cp.order(["a", "b", "c"], ["a", "b"], sample_nodes=5, seed=1)
    assert [p["node"] for p in picked] == ["a", "b", "c"]
    assert cp.order(["a", "b"], [], sample_nodes=0) == []


def test_the_budget_keeps_the_order_and_still_fits_smaller_nodes_after_a_huge_one():
    wanted = [{"node": n, "why": "w"} for n in ("a", "b", "c", "d")]
    pulled, left = cp.within(wanted, {"a": 40, "b": 100, "c": 50, "d": 10}, budget_bytes=100)
    assert [p["node"] for p in pulled] == ["a", "c", "d"] and [item["node"] for item in left] == ["b"]
    assert left[0]["left"] == "over the budget: 140 of 100 bytes" and sum(p["bytes"] for p in pulled) == 100


def test_parse_on_nodes_is_an_alias_of_sample_and_keeps_none():
    assert cp.resolve(True, True, 3)[0] == "sample"
    assert cp.resolve("auto", "true", 3) == (
        "sample",
        "aorta_parse_on_nodes true (an alias of aorta_collect_traces sample)",
    )
    assert cp.resolve(False, True, 3)[0] == "none"
    assert cp.resolve("auto", False, 17, 16)[0] == "sample"
    assert cp.resolve("auto", False, 2, 16)[0] == "all"


def test_who_streams_traces_at_the_end_and_who_summarises():
    assert [cp.takes_traces("all", r) for r in (0, 5)] == [True, True]
    assert [cp.takes_traces("sample", r) for r in (0, 5)] == [True, False]
    assert [cp.takes_traces("none", r) for r in (0, 5)] == [False, False]
    assert [cp.summarised(m) for m in ("all", "sample", "none")] == [False, True, True]


def test_the_seed_comes_from_the_run_id():
    assert cp.seed_of("20261206T000000-a1b2c3") == cp.seed_of("20261206T000000-a1b2c3")
    assert cp.seed_of("20261206T000000-a1b2c3") != cp.seed_of("20261206T000000-a1b2c4")
    assert 0 <= cp.seed_of("x") < 1_000_000


def manifest_of(count: int, on_node=range(1, 10**6), size: int = 100) -> dict:
    """A sampled run's manifest: the head's traces in full, the others kept on their nodes."""
    rows = []
    for rank in range(count):
        row = {"rank": rank, "name": f"n{rank}", "mgmt_ip": f"10.0.0.{rank}", "collected": rank not in on_node}
        if rank in on_node:
            row |= {"on_node": {"root": "/a/out", "since": 1.0}, "files": [{"path": "t.json", "size": size}]}
        rows.append(row)
    return {"nodes": list(reversed(rows))}


def test_the_pull_after_the_report_takes_the_named_the_next_and_a_sample_still_on_their_nodes():
    report = {"stragglers": [{"node": "10.0.0.5"}], "slow_links": [{"node": "n9"}], "slow_nodes": []}
    plan = cp.pull_plan(manifest_of(10), report, sample_nodes=2, seed=3, budget_bytes=10**9)
    whys = [(item["node"], item["why"]) for item in plan["pull"]]
    assert whys[:3] == [
        ("n5", "named by the analysis"),
        ("n9", "named by the analysis"),
        ("n6", "the next node after n5"),
    ]
    # n9's next is the head, already in full: not pulled again; two more drawn from those still away.
    assert [item["node"] for item in plan["pull"]].count("n0") == 0 and len(plan["pull"]) == 5
    assert all(why == "drawn at random (seed 3)" for _node, why in whys[3:]) and plan["left"] == []
    assert [item["rank"] for item in plan["pull"][:3]] == [5, 9, 6]
    again = cp.pull_plan(manifest_of(10), report, sample_nodes=2, seed=3, budget_bytes=10**9)
    assert again == plan  # the same seed draws the same nodes


def test_the_budget_leaves_the_rest_on_their_nodes_and_says_why():
    report = {"slow_nodes": [{"node": "n2"}]}
    plan = cp.pull_plan(manifest_of(4, size=600), report, sample_nodes=0, seed=1, budget_bytes=1000)
    assert [(i["node"], i["bytes"]) for i in plan["pull"]] == [("n2", 600)]
    assert plan["left"] == [
        {
            "node": "n3",
            "why": "the next node after n2",
            "bytes": 600,
            "rank": 3,
            "left": "over the budget: 1200 of 1000 bytes",
        }
    ]


def test_nodes_asked_by_name_or_rank_ignore_the_budget_and_say_what_they_cannot_pull():
    plan = cp.pull_plan(manifest_of(4), {}, 0, 0, 0, asked=["n1", 2, "n1", "n0", "gone"])
    assert [(i["node"], i["rank"], i["why"]) for i in plan["pull"]] == [("n1", 1, "asked"), ("n2", 2, "asked")]
    assert plan["left"] == [
        {"node": "n0", "left": "already in combined_traces"},
        {"node": "gone", "left": "not a node of this run's manifest"},
    ]
    # A node neither collected nor listed (its summary failed at the run's end) says so.
    broken = manifest_of(3)
    broken["nodes"][0].pop("on_node")  # rank 2: reversed
    broken["nodes"][0]["error"] = "summary: pull failed: timed out"
    assert cp.pull_plan(broken, {}, 0, 0, 0, asked=["n2"])["left"] == [
        {
            "node": "n2",
            "left": "not collected (summary: pull failed: timed out) and not listed on its node: "
            "collect the run again (trace_collect.yml)",
        }
    ]
    # A run collected in full has nothing on its nodes: nothing to pull.
    assert cp.pull_plan(manifest_of(4, on_node=()), {"slow_nodes": [{"node": "n1"}]}, 2, 0, 10**9)["pull"] == []
