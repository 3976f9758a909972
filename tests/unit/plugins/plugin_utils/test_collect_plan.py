# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which nodes' traces come in full: the mode, the order, the budget."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils import _collect_plan as cp

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
