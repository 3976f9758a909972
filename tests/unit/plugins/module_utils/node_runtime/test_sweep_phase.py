# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sweep's phase between the join and the go: the head's plan, judgement and summary (scripted
reports, the clock passed in), and a node's side with a scripted endpoint."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep, _sweep_phase

NODES = ["n0", "n1", "n2", "n3"]


def endpoint_body(node, tool="tcp"):
    rank = NODES.index(node)
    return {"sweep_endpoint": {"address": f"10.0.0.{rank + 1}", "port": 40000 + rank, "tool": tool}}


def figures_of(node, rates):
    """The node's figures as its endpoint returns them: ``rates[rank]`` is what that node's link does
    (a pair runs at its slower end)."""
    rank = NODES.index(node)
    rows = []
    for step in _sweep.plan(len(NODES), rank):
        send = min(rates[rank], rates[step["send_to"]])
        recv = min(rates[rank], rates[step["recv_from"]])
        rows.append(dict(step, send_gbps=send, recv_gbps=recv))
    return rows


def joined_phase(**kw):
    phase = _sweep_phase.Phase(NODES, seconds=kw.pop("seconds", 3.0), **kw)
    for node in NODES:
        phase.offer(node, endpoint_body(node))
    return phase


def test_bound_is_the_lead_the_rounds_and_the_reports_and_nothing_when_off():
    assert _sweep_phase.bound_s(10) == _sweep_phase.LEAD_S + 10 + _sweep_phase.REPORT_S
    assert _sweep_phase.bound_s(0) == 0.0


def test_nothing_starts_before_every_node_joined_then_each_node_gets_its_partners_endpoints():
    phase = joined_phase()
    assert phase.advance(False, 5.0) is False and phase.instructions("n1", 5.0) is None
    assert phase.advance(True, 10.0) is False
    plan = phase.instructions("n1", 10.2)
    assert plan["rank"] == 1 and plan["tool"] == "tcp" and plan["start_in"] == pytest.approx(_sweep_phase.LEAD_S - 0.2)
    assert plan["round_s"] == pytest.approx(1.0)  # 3 s over the 3 rounds of 4 nodes
    first = plan["plan"][0]
    assert first == {"round": 0, "send_to": 2, "send_address": "10.0.0.3", "send_port": 40002, "recv_from": 0}
    assert [step["send_to"] for step in plan["plan"]] == [step["send_to"] for step in _sweep.plan(4, 1)]


def test_the_head_judges_once_every_node_reported_and_names_the_slow_one():
    phase = joined_phase()
    phase.advance(True, 0.0)
    rates = [10.0, 10.0, 1.0, 10.0]
    for node in NODES[:3]:
        phase.offer(node, {"sweep_figures": figures_of(node, rates)})
    assert phase.advance(True, 2.0) is False  # n3's figures are not in, and the bound has not passed
    phase.offer("n3", {"sweep_figures": figures_of("n3", rates)})
    assert phase.advance(True, 2.1) is True
    summary = phase.summary()
    assert [(item["node"], item["direction"]) for item in summary["slow"]] == [("n2", "both")]
    assert summary["median_gbps"] == 10.0 and summary["tool"] == "tcp" and summary["localisable"] is True
    assert phase.node_result("n2")["slow"] is True and phase.node_result("n2")["ratio"] == 0.1
    assert phase.node_result("n0")["slow"] is False
    assert phase.instructions("n0", 2.2) is None  # judged: the plan is no longer handed out


def test_a_node_whose_figures_never_come_is_judged_without_them_at_the_bound():
    phase = joined_phase()
    phase.advance(True, 0.0)
    rates = [10.0] * 4
    for node in NODES[:3]:
        phase.offer(node, {"sweep_figures": figures_of(node, rates)})
    end = _sweep_phase.LEAD_S + 3.0 + _sweep_phase.REPORT_S
    assert phase.advance(True, end - 0.1) is False
    assert phase.advance(True, end) is True
    # Every figure is its own end's: n3 measured nothing of itself, its partners are judged without it.
    assert phase.summary()["slow"] == [] and phase.summary()["not_measured"] == ["n3"]


def test_a_node_below_the_minimum_is_the_reason_to_stop_and_none_without_a_minimum():
    rates = [10.0, 0.5, 10.0, 10.0]
    for minimum, expected in ((1.0, "n1"), (0.0, None)):
        phase = joined_phase(min_gbps=minimum)
        phase.advance(True, 0.0)
        for node in NODES:
            phase.offer(node, {"sweep_figures": figures_of(node, rates)})
        phase.advance(True, 1.0)
        below = phase.below_minimum()
        assert (below[0] if below else None) == expected
    assert "n1 sends at 0.5 Gbit/s at best, below aorta_fabric_min_gbps 1" in joined_below()


def joined_below():
    phase = joined_phase(min_gbps=1.0)
    phase.advance(True, 0.0)
    for node in NODES:
        phase.offer(node, {"sweep_figures": figures_of(node, [10.0, 0.5, 10.0, 10.0])})
    phase.advance(True, 1.0)
    return phase.below_minimum()[1]


def test_perftest_only_where_every_node_can_run_it():
    phase = _sweep_phase.Phase(NODES, seconds=3.0)
    for node in NODES:
        phase.offer(node, endpoint_body(node, tool="perftest" if node != "n2" else "tcp"))
    assert phase.tool() == "tcp"
    phase = _sweep_phase.Phase(NODES, seconds=3.0)
    for node in NODES:
        phase.offer(node, endpoint_body(node, tool="perftest"))
    assert phase.tool() == "perftest"


def test_one_node_has_no_round_and_is_judged_at_once_as_not_localisable():
    phase = _sweep_phase.Phase(["n0"], seconds=3.0)
    assert phase.advance(True, 0.0) is True
    assert phase.summary()["localisable"] is False and phase.summary()["rounds"] == []


def test_the_summary_lists_at_most_listed_nodes_by_name_and_counts_the_rest():
    nodes = [f"n{i}" for i in range(60)]
    phase = _sweep_phase.Phase(nodes, seconds=3.0)
    phase.advance(True, 0.0)
    phase.offer("n0", {"sweep_figures": []})
    phase.advance(True, 100.0)
    summary = phase.summary()
    assert summary["not_measured_count"] == 60 and len(summary["not_measured"]) == _sweep_phase.LISTED


class ScriptedEndpoint:
    """A sweep endpoint that returns given figures (no socket: the network part is _sweep_link's)."""

    address, port = "10.0.0.2", 40001

    def __init__(self, figures=None, fails=None):
        self.figures, self.fails, self.rank, self.closed, self.ran = figures, fails, None, False, None

    def run(self, plan, start_at, round_s):
        self.ran = (plan, start_at, round_s)
        if self.fails:
            raise OSError(self.fails)
        return self.figures

    def close(self):
        self.closed = True


def test_a_participant_offers_its_endpoint_measures_on_the_plan_then_reports_its_figures_and_verdict():
    figures = [{"round": 0, "send_to": 2, "send_gbps": 3.0, "recv_from": 0, "recv_gbps": 2.9}]
    endpoint = ScriptedEndpoint(figures)
    node = _sweep_phase.Participant(endpoint, "tcp", "asked for", clock=lambda: 100.0)
    assert node.fields() == {"sweep_endpoint": {"address": "10.0.0.2", "port": 40001, "tool": "tcp"}}
    node.follow({"go": False, "sweep": {"rank": 1, "tool": "tcp", "start_in": 0.5, "round_s": 1.0, "plan": ["p"]}})
    node.thread.join(2)
    assert endpoint.rank == 1 and endpoint.ran == (["p"], 100.5, 1.0)
    assert node.fields() == {"sweep_figures": figures}
    node.follow({"go": True, "sweep_result": {"send_gbps": 3.0, "slow": False, "ratio": 1.0}})
    node.finish()
    record = node.record()
    assert record["tool"] == "tcp" and record["rounds"] == figures and record["slow"] is False
    assert record["took_s"] == 0.0  # the scripted clock stands still
    assert endpoint.closed is True


def test_a_participant_whose_measurement_fails_reports_no_figure_and_says_why():
    node = _sweep_phase.Participant(ScriptedEndpoint(fails="no route"), "tcp", "", clock=lambda: 0.0)
    node.follow({"sweep": {"rank": 0, "tool": "tcp", "start_in": 0, "round_s": 1.0, "plan": []}})
    node.thread.join(2)
    assert node.fields() == {"sweep_figures": []} and node.record()["error"] == "sweep failed: no route"


def test_a_node_without_an_endpoint_takes_part_unmeasured():
    node = _sweep_phase.Participant(None, error="no port on 10.0.0.9: address not available")
    assert node.fields() == {"sweep_endpoint": {"error": "no port on 10.0.0.9: address not available"}}
    node.follow({"sweep": {"rank": 0, "tool": "tcp", "start_in": 0, "round_s": 1.0, "plan": []}})
    assert node.fields() == {"sweep_figures": []} and threading.active_count() >= 1
    assert node.record()["error"].startswith("no port on")


def test_with_two_nodes_a_pair_below_the_minimum_names_and_stops_nobody():
    phase = _sweep_phase.Phase(["n0", "n1"], seconds=1.0, min_gbps=1.0)
    for node in ("n0", "n1"):
        phase.offer(node, {"sweep_endpoint": {"address": node, "port": 1, "tool": "tcp"}})
    phase.advance(True, 0.0)
    phase.offer(
        "n0", {"sweep_figures": [{"round": 0, "send_to": 1, "send_gbps": 9.0, "recv_from": 1, "recv_gbps": 0.2}]}
    )
    phase.offer(
        "n1", {"sweep_figures": [{"round": 0, "send_to": 0, "send_gbps": 0.2, "recv_from": 0, "recv_gbps": 9.0}]}
    )
    assert phase.advance(True, 1.0) is True
    assert phase.below_minimum() is None and phase.summary()["localisable"] is False


def test_the_tool_is_fixed_at_the_start_and_the_summary_counts_every_slow_node():
    phase = joined_phase()
    phase.advance(True, 0.0)
    phase.endpoints["n1"]["tool"] = "perftest"  # a change after the start does not change the plan
    assert phase.chosen == "tcp" and phase.instructions("n0", 0.1)["tool"] == "tcp"
    for node in NODES:
        phase.offer(node, {"sweep_figures": figures_of(node, [10.0, 1.0, 10.0, 10.0])})
    phase.advance(True, 1.0)
    assert phase.summary()["slow_count"] == len(phase.summary()["slow"]) == 1


def test_a_stop_with_the_plan_starts_no_measurement():
    endpoint = ScriptedEndpoint([])
    node = _sweep_phase.Participant(endpoint, "tcp", "", clock=lambda: 0.0)
    node.follow({"stop": True, "sweep": {"rank": 0, "tool": "tcp", "start_in": 0, "round_s": 1.0, "plan": []}})
    assert node.thread is None and endpoint.ran is None
