# SPDX-License-Identifier: GPL-3.0-or-later
"""The straggler test on recorded healthy and planted-straggler stand-in traces, and what too few
profiled steps can show."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _stragglers
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report

STRAGGLERS = Path(__file__).parent / "straggler_data"


@pytest.mark.parametrize("run", [f"ok{i}" for i in range(1, 6)])
def test_healthy_stand_in_runs_name_no_straggler(run):
    report = _report.build_report(str(STRAGGLERS / run))
    assert report["stragglers"] == [], report["stragglers"]
    assert report["straggler_test"]["verdict"] == "none stands out"
    assert report["straggler_test"]["steps"] == 4 and report["straggler_test"]["ranks"] == 4


@pytest.mark.parametrize("run", ["slow1", "slow2", "slow3"])
def test_a_rank_planted_at_one_and_a_half_times_compute_is_named_first(run):
    report = _report.build_report(str(STRAGGLERS / run))
    first = report["stragglers"][0]
    assert first["rank"] == 2 and first["excess_ratio"] > 0.1
    assert min(first["p_value_steps"], first["p_value_arrivals"]) < report["straggler_test"]["alpha"]


def test_two_profiled_steps_cannot_name_anyone_and_the_report_says_why(tmp_path):
    ranks = [
        {"rank": r, "node": "n", "compute_per_iteration_ms": 1.0, "comm_wait_per_iteration_ms": 1.0} for r in range(4)
    ]
    evidence = {
        r: {"step_compute_ms": [[1, 5.0 * (2 if r == 3 else 1)], [2, 5.0 * (2 if r == 3 else 1)]]} for r in range(4)
    }
    slow, _nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    # Alone the slowest in 2 of 2 steps among 4 ranks: 4 x (1/4)^2 = 25% by chance alone.
    assert slow == [] and "profile at least 4 steps" in test["verdict"]
    evidence = {r: {"step_compute_ms": [[k, 5.0 * (2 if r == 3 else 1)] for k in range(4)]} for r in range(4)}
    slow, _nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    assert [s["rank"] for s in slow] == [3] and slow[0]["p_value_steps"] == pytest.approx(4 * 0.25**4)


def synthetic(nodes: int, seed: int, slow_node=None, slow_rank=None, factor=1.3, steps=6, per_node=8, noise=0.03):
    """Synchronous data-parallel steps: each rank computes ~100 ms with ``noise`` (relative, per rank
    and step), every rank of ``slow_node`` (or rank ``slow_rank`` alone) ``factor`` times longer;
    at each step's collective every rank waits for the last to arrive, so the late ones wait least."""
    rng = random.Random(seed)
    ranks, evidence = [], {}
    world = nodes * per_node
    for rank in range(world):
        ranks.append({"rank": rank, "node": f"node-{rank // per_node:04d}", "compute_per_iteration_ms": 100.0})
        evidence[rank] = {"step_compute_ms": [], "collective_ms": []}
    for step in range(steps):
        compute = {}
        for rank in range(world):
            slow = rank // per_node == slow_node or rank == slow_rank
            compute[rank] = 100.0 * (factor if slow else 1.0) * (1.0 + rng.gauss(0.0, noise))
        arrival = max(compute.values())
        for rank in range(world):
            evidence[rank]["step_compute_ms"].append([step, compute[rank]])
            evidence[rank]["collective_ms"].append(arrival - compute[rank] + 5.0 + rng.uniform(0.0, 0.2))
    return ranks, evidence


@pytest.mark.parametrize("nodes", [8, 128, 1024])
def test_a_node_whose_every_rank_computes_longer_is_named_with_its_evidence(nodes):
    """64, 1024 and 8192 ranks: no rank of a throttled node is alone the slowest, the node is."""
    ranks, evidence = synthetic(nodes, seed=nodes, slow_node=nodes // 3)
    slow, slow_nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    (found,) = slow_nodes
    assert found["node"] == f"node-{nodes // 3:04d}" and found["ranks"] == list(
        range(nodes // 3 * 8, nodes // 3 * 8 + 8)
    )
    assert found["excess_ratio"] == pytest.approx(0.3, abs=0.05)
    assert min(found["p_value_steps"], found["p_value_arrivals"]) < test["alpha"]
    assert len(found["per_step"]) == 6
    assert all(s["node_compute_ms"] > 1.2 * s["median_node_compute_ms"] for s in found["per_step"])
    assert slow == []  # its ranks are no slower than their node's other ranks: the node's finding
    assert test["node_test"]["verdict"] == "1 slow node(s) at 5% significance"


@pytest.mark.parametrize("nodes", [8, 128, 1024])
def test_a_rank_slower_than_its_node_and_the_rest_is_named_with_its_node(nodes):
    ranks, evidence = synthetic(nodes, seed=7 * nodes, slow_rank=nodes * 8 // 2 + 3, factor=1.5)
    slow, slow_nodes, _test = _stragglers.stragglers(ranks, 0.1, evidence)
    assert [s["rank"] for s in slow] == [nodes * 8 // 2 + 3]
    assert slow[0]["node"] == f"node-{nodes // 2:04d}" and slow[0]["excess_over_node_ratio"] > 0.4
    assert slow_nodes == []  # one slow rank of eight does not make its node slow


def test_healthy_synthetic_sets_name_nobody_in_100_seeds():
    named = []
    for seed in range(100):
        ranks, evidence = synthetic(8, seed=1000 + seed)
        slow, slow_nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
        if slow or slow_nodes:
            named.append((seed, slow, slow_nodes))
    assert named == []
    assert test["verdict"] == "none stands out" and test["node_test"]["verdict"] == "no node stands out"


@pytest.mark.parametrize("nodes", [128, 1024])
def test_healthy_large_synthetic_sets_name_nobody(nodes):
    for seed in range(3):
        ranks, evidence = synthetic(nodes, seed=seed, noise=0.05)
        slow, slow_nodes, _test = _stragglers.stragglers(ranks, 0.1, evidence)
        assert (slow, slow_nodes) == ([], [])


def test_too_few_steps_to_name_a_node_says_how_many_it_would_take():
    ranks, evidence = synthetic(2, seed=3, slow_node=1, steps=2, per_node=4)
    _slow, slow_nodes, test = _stragglers.stragglers(ranks, 0.1, evidence)
    # Two nodes: alone the slower in 2 of 2 steps is 2 x (1/2)^2 = 50% by chance alone.
    assert slow_nodes == [] and "profile at least 6 steps" in test["node_test"]["verdict"]


def test_one_slow_rank_of_a_two_rank_node_is_that_ranks_finding_not_its_nodes():
    """Two ranks per node (the stand-in's): a rank at 1.5x moves its node's median by 25%; the node
    is judged by its other rank once the slow rank is named."""
    ranks, evidence = synthetic(4, seed=11, slow_rank=2, factor=1.5, steps=8, per_node=2)
    slow, slow_nodes, _test = _stragglers.stragglers(ranks, 0.1, evidence)
    assert [s["rank"] for s in slow] == [2] and slow_nodes == []


FIXTURE_TRACES = Path(__file__).resolve().parents[4] / "fixtures" / "traces"
# Each real trace alone, and the real multi-rank sets together (set2's 8-rank DLRM and its two
# sampled ranks of a 128-rank run): recorded on healthy systems, none has a slow rank or node.
FIXTURE_SETS = sorted(
    [str(p.relative_to(FIXTURE_TRACES)) for p in FIXTURE_TRACES.rglob("*.json.gz")]
    + ["set2/dlrm-rank", "set2/sampled-rank"]
)


@pytest.mark.parametrize("name", FIXTURE_SETS)
def test_every_fixture_trace_and_trace_set_names_nobody(tmp_path, name):
    folder = tmp_path / "traces"
    folder.mkdir()
    sources = [FIXTURE_TRACES / name] if name.endswith(".gz") else sorted(FIXTURE_TRACES.glob(name + "*.json.gz"))
    assert sources, name
    for source in sources:
        (folder / source.name).write_bytes(source.read_bytes())
    report = _report.build_report(str(folder))
    assert len(report["per_rank_summary"]) == len(sources)
    assert (report["stragglers"], report["slow_nodes"]) == ([], []), (report["stragglers"], report["slow_nodes"])


def test_a_slow_links_evidence_is_one_line_with_what_is_known():
    link = {"node": "10.0.0.3", "direction": "send", "send_gbps": 0.19, "recv_gbps": 3.7, "median_gbps": 3.8}
    link |= {"ratio": 0.05, "collective_ratio": 1.4, "busbw_ratio": 0.3, "busbw_op": "allreduce"}
    assert _stragglers.slow_link_evidence(link) == (
        "10.0.0.3: fabric 0.19 Gbit/s sent against a median of 3.8 Gbit/s (0.05x); collectives 1.4x the median "
        "node; allreduce busbw 0.3x the fabric"
    )
    # run.json's own entry (no collective figures), slow both ways.
    both = {
        "node": "n2",
        "direction": "both",
        "send_gbps": 0.4,
        "recv_gbps": 0.512,
        "median_gbps": 3.812,
        "ratio": 0.105,
    }
    assert _stragglers.slow_link_evidence(both) == (
        "n2: fabric 0.4 Gbit/s sent, 0.512 Gbit/s received against a median of 3.81 Gbit/s (0.1x)"
    )
    assert _stragglers.slow_link_evidence({"node": "n2"}) == "n2: fabric slow (direction not recorded)"
    assert [_stragglers.times(x) for x in (0.0024, 0.31, 1.4, 9.96, 12.4, None, True)] == [
        "0.0024x",
        "0.31x",
        "1.4x",
        "10x",
        "12x",
        "",
        "",
    ]
