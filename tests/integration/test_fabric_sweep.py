# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric sweep between the real stand-in nodes, over their fabric network, before the ranks
start: one node's fabric egress throttled with tc (tbf: egress rate only) is named in run.json, the
report's opening rows, its JSON and junit.xml, and no other node is; the run completes. Two rates:
one that slows the training clearly (200 Mbit/s with 4 MB of gradients a step), and one that slows it
less than 2x (1 Gbit/s with the stand-in's default model), which only the sweep names.

The stand-in has no RDMA device: with ``auto`` the sweep runs TCP even where ``ib_write_bw`` is on
the PATH (the fallback), and asking for perftest refuses the launch naming the variable."""

from __future__ import annotations

import json

import pytest
import standin
from test_insight import junit_failures

pytestmark = pytest.mark.standin

# 4 MB of gradients a step (one 1024 x 1024 layer): at 200 Mbit/s a step's all-reduce takes a
# quarter of a second on the throttled node, against a few ms on the others.
HEAVY = {"model.model_dim": 1024, "training.max_steps": 6}


def swept(standin_cluster, tmp_path, rate, overrides, status="COMPLETED", **extra):
    """A run on the session's 3 nodes with the middle node's fabric egress at ``rate``."""
    slow = standin_cluster.nodes[1]
    standin.throttle(slow["container"], rate)
    try:
        proc, run, results, _seconds = standin_cluster.run(
            tmp_path, slow_link=True, aorta_training_overrides=overrides, **extra
        )
    finally:
        standin.throttle(slow["container"], "")
    assert run is not None, proc.stdout[-3000:]
    assert run["status"] == status, run["message"]
    return slow["mgmt_ip"], run, results, proc


def assert_named_alone(node, run, results, proc):
    sweep = run["fabric_sweep"]
    assert sweep["ran"] is True and sweep["tool"] == "tcp" and sweep["localisable"] is True, sweep
    # tbf slows the node's egress: its streams out, and the acknowledgements of those coming in
    # (measured: 0.196 Gbit/s at best both ways at 200 Mbit/s), so "both" or "send".
    assert [item["node"] for item in sweep["slow"]] == [node] and sweep["slow"][0]["direction"] in ("send", "both")
    (named,) = sweep["slow"]
    assert named["ratio"] < 0.5 and named["send_gbps"] < named["median_gbps"] * 0.5
    rows = {row["name"]: row["fabric_sweep"] for row in run["nodes"]}
    # The sweep's cost on 3 nodes (aorta_fabric_sweep_seconds 1 in the stand-in's vars): the plan's
    # arrival to the verdict, on every node.
    assert all(row["took_s"] <= 10 for row in rows.values()), rows
    assert rows[node]["slow"] is True and [n for n, row in rows.items() if row["slow"]] == [node]
    assert all(f["send_gbps"] and f["recv_gbps"] for row in rows.values() for f in row["rounds"]), rows
    report = json.loads((results / "aorta_benchmark_report.json").read_text())
    assert [link["node"] for link in report["slow_links"]] == [node], report["slow_links"]
    page = (results / "report.html").read_text()
    row = page.index(f"{node}: fabric ")
    assert row < page.index("<svg"), "the slow link is named before any chart"
    assert f"fabric sweep (tcp): slow link on {node}" in proc.stdout
    return report, page


def assert_the_link_fails_the_verdict(node, run, results, proc, report, page):
    """The rule: a slow link fails the verdict of a run that completed, in every output alike."""
    verdict = json.loads((results / "run.json").read_text())["verdict"]
    assert verdict["verdict"] == "FAIL" and verdict["findings"] == ["slow_link"], verdict
    assert verdict["reasons"][0].startswith(f"slow link: {node}: fabric "), verdict
    assert proc.returncode != 0, proc.stdout[-3000:]
    failures = junit_failures(results)
    assert sorted(key.rsplit(": ", 1)[-1] for key in failures) == ["slow link", "verdict"], failures
    assert node in failures["aorta.findings: slow link"]
    assert report["verdict"] == verdict
    first_row = page[page.index("<tr id='verdict'>") :].split("</tr>", 1)[0]
    assert "FAIL" in first_row and node in first_row, first_row
    assert f"verdict FAIL: slow link: {node}: fabric " in proc.stdout


def assert_the_link_is_a_note(node, results, proc):
    """aorta_verdict_ignores: [slow_link]: the run passes, exits 0, and every output says the link was
    found and ignored."""
    verdict = json.loads((results / "run.json").read_text())["verdict"]
    assert verdict["verdict"] == "PASS" and verdict["ignored"] == ["slow_link"], verdict
    assert any(
        n.startswith(f"slow link: {node}: ") and n.endswith("ignored (aorta_verdict_ignores)") for n in verdict["notes"]
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert junit_failures(results) == {}
    junit = (results / "junit.xml").read_text()
    assert "ignored (aorta_verdict_ignores): " in junit and node in junit


def fake_perftest(cluster, present):
    """An ib_write_bw on every node's PATH (installed, but no RDMA device under /sys/class/infiniband
    on a stand-in node), or none."""
    for i in range(len(cluster.nodes)):
        if present:
            cluster.node_exec(i, "sh", "-c", "printf '#!/bin/sh\\nexit 1\\n' > /usr/local/bin/ib_write_bw")
            cluster.node_exec(i, "chmod", "755", "/usr/local/bin/ib_write_bw")
        else:
            cluster.node_exec(i, "rm", "-f", "/usr/local/bin/ib_write_bw")


# A throttled link measured against the others: no other worker's runs beside it on the two cores.
@pytest.mark.whole_machine
def test_a_node_whose_fabric_egress_is_throttled_is_named_alone_and_the_run_completes(standin_cluster, tmp_path):
    node, run, results, proc = swept(standin_cluster, tmp_path, "200mbit", HEAVY)
    assert_the_link_fails_the_verdict(node, run, results, proc, *assert_named_alone(node, run, results, proc))
    # Slow, not silent: its heartbeats went through the same throttled egress and no node was missed.
    assert all(not row.get("silent_nodes") for row in run["nodes"])

    # Below aorta_fabric_min_gbps: the head stops the run before any rank starts, naming that node
    # first (not the head), and unhealthy.txt lists it alone for the next run.
    node, run, results, proc = swept(standin_cluster, tmp_path, "200mbit", {}, "FAILED", aorta_fabric_min_gbps=1)
    assert proc.returncode != 0 and run["first_failure"] == node, run["message"]
    assert "below aorta_fabric_min_gbps 1" in run["message"], run["message"]
    assert all(not row["progress"] or not any(row["progress"].values()) for row in run["nodes"]), "no rank trained"
    assert (results / "unhealthy.txt").read_text().split("\t")[0] == node
    assert standin_cluster.containers_left() == []

    # With ib_write_bw installed and no RDMA device, auto runs TCP (assert_named_alone checks the tool).
    fake_perftest(standin_cluster, present=True)
    try:
        node, run, results, proc = swept(standin_cluster, tmp_path, "1gbit", {}, aorta_verdict_ignores=["slow_link"])
        assert_named_alone(node, run, results, proc)
        assert_the_link_is_a_note(node, results, proc)
        # Asked for by name where it cannot run: the launch is refused, naming the variable, nothing left.
        proc, run, _results, _seconds = standin_cluster.run(tmp_path, aorta_fabric_sweep_tool="perftest")
    finally:
        fake_perftest(standin_cluster, present=False)
    assert proc.returncode != 0 and run["status"] == "FAILED"
    assert "aorta_fabric_sweep_tool" in run["message"] and "RDMA device" in run["message"], run["message"]
    assert standin_cluster.containers_left() == []
