# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric contract: training traffic on each node's vpc_ip, the wrong-interface hang caught.

The stand-in nodes' management networks cannot reach each other; only the fabric connects them,
so a launch that advertises the management address hangs, as on a real cluster.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.standin


@pytest.mark.parametrize("nodes", [2, 3])
def test_run_completes_on_the_fabric_without_any_interface_setting(standin_cluster, tmp_path, nodes):
    if nodes > len(standin_cluster.nodes):
        pytest.skip(f"the stand-in cluster has {len(standin_cluster.nodes)} nodes")
    inventory = standin_cluster.cluster_file(tmp_path, nodes)
    proc, run, _results, _elapsed = standin_cluster.run(tmp_path, inventory=inventory)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert run["status"] == "COMPLETED"
    for node, standin_node in zip(run["nodes"], standin_cluster.nodes):
        assert node["vpc_ip"] == standin_node["vpc_ip"]
        assert node["fabric_if"] == standin_node["fabric_if"]
    # The chosen interface is in run.json per node (above) and counted on the console, which prints
    # no line per node for a healthy run (each node's own line is shown with -v).
    interface = standin_cluster.nodes[0]["fabric_if"]
    assert f"; fabric interface {interface}" in proc.stdout  # preflight's line
    assert f"nodes: {nodes} ({nodes} ok); fabric interface: {interface} on {nodes}" in proc.stdout  # the end table


def test_forcing_the_management_interface_is_stopped_before_launch(standin_cluster, tmp_path):
    inventory = standin_cluster.cluster_file(tmp_path, 2)
    proc, run, _results, elapsed = standin_cluster.run(
        tmp_path, inventory=inventory, aorta_extra_env={"GLOO_SOCKET_IFNAME": "eth0"}, aorta_fabric_check_timeout=15
    )
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert "GLOO_SOCKET_IFNAME=eth0" in run["message"] and "cannot reach the head" in run["message"]
    assert elapsed < 60, elapsed
    assert "Launch on every node at once" not in proc.stdout
    assert standin_cluster.containers_left() == []


def test_vpc_ip_that_no_interface_holds_fails_in_preflight_naming_it(standin_cluster, tmp_path):
    victim = standin_cluster.nodes[1]["mgmt_ip"]
    # A documentation address (TEST-NET-1): no packet is ever sent to it.
    inventory = standin_cluster.cluster_file(tmp_path, 2, vpc_ip={victim: "192.0.2.77"})
    proc, run, _results, _elapsed = standin_cluster.run(tmp_path, inventory=inventory)
    assert proc.returncode != 0
    assert run["status"] == "FAILED"
    assert f"{victim}: no interface holds the fabric address (vpc_ip) 192.0.2.77" in run["message"]
    assert "eth0=" in run["message"] and "eth1=" in run["message"]
    assert "Launch on every node at once" not in proc.stdout
