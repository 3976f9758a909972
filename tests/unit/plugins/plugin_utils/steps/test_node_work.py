# SPDX-License-Identifier: GPL-3.0-or-later
"""What several steps do on a node: the fabric link's facts into preflight's fingerprint, a probe
that failed passed through unjudged, and a transfer that cannot stream over ssh (another connection
plugin) falls back to pack and pull. The steps' own tests run each ability end to end (test_run_wait,
test_node_probe, test_node_prepare, test_node_end, test_trace_pull)."""

from __future__ import annotations

from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.plugin_utils.steps import _node_work


def test_the_fabric_links_speed_and_mtu_join_the_fingerprint_and_the_others_links_do_not():
    derived = {"fabric_if": "eth1", "fingerprint": {"amdgpu": "6.8.5"}}
    links = {"eth1": {"speed_mbps": 400000, "mtu": 9000, "driver": "mlx5_core"}, "eth0": {"mtu": 1500}}
    _node_work.link_facts(derived, links)
    assert derived["link"] == links["eth1"]
    assert derived["fingerprint"] == {
        "amdgpu": "6.8.5",
        "link_speed_mbps": 400000,
        "link_mtu": 9000,
        "nic_driver": "mlx5_core",
    }
    untouched = {"fabric_if": "eth9"}
    _node_work.link_facts(untouched, links)
    assert untouched == {"fabric_if": "eth9"}


def test_a_probe_that_failed_is_passed_through_unjudged():
    failed = {"failed": True, "msg": "unreachable", "_answered": 1.0}
    assert _node_work.NodeProbe.judged(failed, {}, {"inventory_hostname": "n1"}) == {
        "failed": True,
        "msg": "unreachable",
    }


class Transfer(_node_work.NodeTransfer):
    def run(self, tmp=None, task_vars=None):
        return super().run(tmp, task_vars)


def test_without_an_ssh_connection_there_is_no_stream_and_the_node_packs_instead():
    task = SimpleNamespace(args={}, async_val=0, check_mode=False, action="aorta.cluster.node_end")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None), transport="local")
    action = Transfer(task, connection, SimpleNamespace(check_mode=False, password=None), None, None)
    assert action._stream_argv({"aorta_collect_compression": "gzip"}, "/root", 0.0) is None
