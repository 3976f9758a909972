# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's time bounds keep their order, so the node's supervisor always ends the run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import (
    _kernel_log,
    _sweep_phase,
    _time_bounds,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _supervisor as sv
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import (
    LAUNCH_NAMES,
    launch_deadlines,
    node_launch,
    run_head,
    run_nodes,
)


@pytest.mark.parametrize("timeout,grace,setup", [(1, 0, 1), (60, 10, 1800), (3600, 30, 1800), (86400, 600, 60)])
def test_every_bound_outlasts_the_one_before_it(timeout, grace, setup):
    d = launch_deadlines(timeout, grace, setup, 30)
    # the supervisor's worst case: deadline, diagnostics, grace, SIGKILL wait, cleanup
    assert d["supervisor_end_s"] >= timeout + d["diagnose_s"] + grace
    assert d["supervisor_end_s"] < d["wait_s"] < d["async_s"] < d["container_lifetime_s"]
    assert d["container_lifetime_s"] > setup + d["async_s"] - 1
    assert d["setup_lease_s"] > setup
    # Every node's launch (a pull can take the whole setup timeout) joins in time, within the deadline.
    assert d["join_s"] == min(setup + 120, timeout) and d["join_s"] <= timeout


def test_text_numbers_from_a_survey_are_taken_and_bad_ones_refused():
    assert launch_deadlines("60", "10", "1800", "30")["timeout_s"] == 60
    with pytest.raises(LaunchError, match=r"^launch_deadlines: .*whole numbers"):
        launch_deadlines("soon", 10, 1800, 30)
    with pytest.raises(LaunchError, match="at least"):
        launch_deadlines(0, 10, 1800, 30)
    with pytest.raises(TypeError):  # aorta_heartbeat_timeout's one default is the defaults role's
        launch_deadlines(60, 10, 1800)  # type: ignore[call-arg]


def supervisor_worst_case(timeout, grace, diagnose_s=30, fabric_s=3, linger_s=0):
    """What the supervisor itself can take, added up from its own constants: the deadline, the
    fabric check, the capture (its last step killed at the budget), SIGTERM's docker exec, the grace,
    SIGKILL's docker exec, the waits after SIGKILL, both cleanup commands, the kernel log scan, the
    final report to the head, and on the head the wait for the others."""
    signal_command = sv.SIGNAL_COMMAND_S + sv.REAP_AFTER_KILL_S
    return (
        timeout
        + fabric_s
        + diagnose_s
        + sv.REAP_AFTER_KILL_S
        + signal_command
        + grace
        + signal_command
        + sv.KILL_WAIT_S
        + sv.KILL_GROUP_WAIT_S
        + 2 * (sv.CLEANUP_COMMAND_S + sv.REAP_AFTER_KILL_S)
        + _kernel_log.WORST_S
        + 3 * _time_bounds.REPLY_WAIT_S  # the final report's three tries
        + linger_s
    )


@pytest.mark.parametrize("timeout,grace", [(1, 0), (60, 10), (3600, 30), (86400, 600)])
def test_the_controllers_wait_outlasts_the_supervisors_worst_case_from_its_own_constants(timeout, grace):
    d = launch_deadlines(timeout, grace, 1800, 30)
    own = supervisor_worst_case(timeout, grace)
    assert own - timeout <= _time_bounds.stop_bound_s(grace, 30)  # the lease and the plan use this bound
    # A node's own stop fits in the silence the head allows a stopping node.
    assert d["stopping_s"] >= own - timeout
    # The head: its own worst case, then serving the others for as long as a stopping node may be silent.
    head = supervisor_worst_case(timeout, grace, linger_s=d["stopping_s"])
    assert head <= d["supervisor_end_s"] < d["wait_s"] < d["async_s"]


def launch_settings(**overrides):
    """Every value node_launch reads, as the play would give them: the generated defaults, then the run's."""
    defaults = yaml.safe_load(
        (Path(__file__).resolve().parents[5] / "roles" / "defaults" / "defaults" / "main.yml").read_text()
    )
    values = {name: defaults.get(name) for name in LAUNCH_NAMES}
    values.update(
        aorta_run_id_resolved="r1",
        aorta_results_dir_resolved="/res/r1",
        aorta_output_dir="aorta_runs/r1",
        aorta_path="/home/me/aorta",
        aorta_vpc_ip="10.1.0.2",
        aorta_node_rank=1,
        aorta_gpus_per_node=8,
    )
    values.update(overrides)
    return values


PREPARED = {
    "facts": {"group_ids": [44, 109], "container_devices": ["/dev/kfd", "/dev/dri"]},
    "derived": {
        "fabric_if": "ens51",
        "fabric_env": {"NCCL_SOCKET_IFNAME": "ens51", "GLOO_SOCKET_IFNAME": "ens51"},
        "pyspy": {"source": "/usr/bin/py-spy", "node_path": "/var/tmp/aorta-cluster/tools/py-spy-ab", "sha256": "ab"},
    },
}
HEAD = {"name": "gpu-a", "vpc_ip": "10.1.0.1", "port": 29517}


def test_a_workers_launch_rendezvous_on_the_heads_fabric_address_and_port():
    plan = node_launch(launch_settings(), "gpu-b", ["gpu-a", "gpu-b"], HEAD, PREPARED)
    assert plan["launch_mode"] == "torchrun" and plan["nproc"] == 8
    assert plan["master_addr"] == "10.1.0.1" and plan["master_port"] == 29517
    argv = plan["argv"]
    assert "--nnodes=2" in argv and "--node_rank=1" in argv and "--master_addr=10.1.0.1" in argv
    assert "--master_port=29517" in argv and "--nproc_per_node=8" in argv
    assert argv.count("--override") == 1  # one group: Aorta's argparse keeps only the last
    assert plan["environment"]["GLOO_SOCKET_IFNAME"] == "ens51"
    assert plan["container"] == "aorta-benchmark-r1"
    run = plan["docker_run"]
    assert "--group-add" in run and "44" in run and "/dev/kfd" in " ".join(run)
    assert "aorta.cluster.node_rank=1" in " ".join(run)
    sup = plan["supervisor"]
    assert sup["ranks"] == list(range(8, 16))
    assert sup["watch"]["nodes"] == [] and sup["watch"]["head"] == "gpu-a" and "secret" not in sup["watch"]
    assert sup["fabric"] == {
        "interface": "ens51",
        "address": "10.1.0.2",
        "head_address": "10.1.0.1",
        "head_port": 29517,
    }
    assert sup["pyspy_path"].endswith("py-spy-ab") and sup["progress_dir"] == "/home/me/aorta/aorta_runs/r1"
    assert plan["container_args"]["writable"][0] == "/mnt/.aorta-cluster/r1/node_1"
    assert plan["container_args"]["build"] == []  # aorta_skip_rccl_build's default


def test_the_head_serves_every_node_and_its_deadlines_come_from_one_source():
    s = launch_settings(aorta_node_rank=0, aorta_vpc_ip="10.1.0.1", aorta_timeout_seconds=900)
    plan = node_launch(s, "gpu-a", ["gpu-a", "gpu-b"], HEAD, PREPARED)
    assert plan["supervisor"]["watch"]["nodes"] == ["gpu-a", "gpu-b"]
    assert plan["deadlines"] == launch_deadlines(
        900, s["aorta_kill_grace_seconds"], s["aorta_setup_timeout_seconds"], s["aorta_heartbeat_timeout"]
    )
    assert plan["supervisor"]["timeout_seconds"] == 900
    assert plan["supervisor"]["watch"]["stopping_timeout"] == plan["deadlines"]["stopping_s"]


def test_one_node_runs_the_experiment_script_and_collects_from_the_configs_output_dir():
    s = launch_settings(aorta_node_rank=0, aorta_skip_rccl_build=False)
    plan = node_launch(s, "gpu-a", ["gpu-a"], HEAD, {}, collect_dir="artifacts/standin")
    assert plan["launch_mode"] == "script"
    assert plan["argv"] == ["bash", "/mnt/scripts/launch_rocm.sh", "/mnt/config/distributed.yaml"]
    assert plan["supervisor"]["progress_dir"] == "/home/me/aorta/artifacts/standin"
    assert plan["container_args"]["build"] == ["bash", "/mnt/scripts/build_rccl.sh"]
    assert "fabric" not in plan["supervisor"]  # no fabric interface known: nothing to ask when it goes wrong


def test_a_bad_launch_mode_is_refused_naming_the_variable():
    with pytest.raises(LaunchError, match="aorta_master_launch_mode"):
        node_launch(launch_settings(aorta_master_launch_mode="script"), "gpu-b", ["gpu-a", "gpu-b"], HEAD, PREPARED)


def test_the_run_nodes_leave_out_the_excluded_and_keep_cluster_file_order():
    prepared = {
        "n0": {"excluded": True, "failures": ["preflight[health]: n0: leaked"]},
        "n1": {"changed": True},
        "n2": {"excluded": True, "msg": "preflight[ssh]: unreachable: n2"},
        "n3": {},
    }
    run = run_nodes(["n0", "n1", "n2", "n3"], prepared)
    assert run["nodes"] == ["n1", "n3"] and run["head"] == "n1"
    assert run["excluded"] == [
        {"name": "n0", "reasons": ["preflight[health]: n0: leaked"]},
        {"name": "n2", "reasons": ["preflight[ssh]: unreachable: n2"]},
    ]
    assert run_nodes(["n0", "n1"], {})["nodes"] == ["n0", "n1"]  # nothing excluded: every node, in order


def test_fewer_nodes_than_aorta_min_nodes_stop_before_the_launch_naming_every_excluded_node():
    prepared = {"n0": {"excluded": True, "failures": ["preflight[health]: n0: ecc"]}, "n2": {"excluded": True}}
    with pytest.raises(LaunchError) as raised:
        run_nodes(["n0", "n1", "n2"], prepared, min_nodes=2)
    assert str(raised.value) == (
        "launch: 1 of 3 nodes passed preflight, aorta_min_nodes is 2: preflight[health]: n0: ecc; excluded"
    )
    with pytest.raises(LaunchError):
        run_nodes(["n0"], {"n0": {"excluded": True}})


def test_the_mode_follows_the_cluster_not_the_survivors():
    s = launch_settings(aorta_node_rank=0)
    plan = node_launch(s, "gpu-a", ["gpu-a"], HEAD, PREPARED, cluster_nodes=4)
    assert plan["launch_mode"] == "torchrun" and "--nnodes=1" in plan["argv"]
    assert node_launch(s, "gpu-a", ["gpu-a"], HEAD, PREPARED)["launch_mode"] == "script"


def test_the_fabric_sweep_is_on_by_default_bound_to_the_nodes_fabric_address_and_lengthens_the_join():
    plan = node_launch(launch_settings(), "gpu-b", ["gpu-a", "gpu-b"], HEAD, PREPARED)
    watch = plan["supervisor"]["watch"]
    assert watch["sweep"] == {"address": "10.1.0.2", "seconds": 10.0, "tool": "auto", "threshold": 0.5, "min_gbps": 0.0}
    assert watch["join_timeout"] == plan["deadlines"]["join_s"] + math.ceil(_sweep_phase.bound_s(10.0))


@pytest.mark.parametrize("off", [{"aorta_fabric_sweep": False}, {"aorta_fabric_sweep_seconds": 0}])
def test_the_fabric_sweep_off_leaves_the_join_as_it_was(off):
    plan = node_launch(launch_settings(**off), "gpu-b", ["gpu-a", "gpu-b"], HEAD, PREPARED)
    assert "sweep" not in plan["supervisor"]["watch"]
    assert plan["supervisor"]["watch"]["join_timeout"] == plan["deadlines"]["join_s"]


def test_the_run_head_is_the_elected_one_else_the_head_group_else_the_first_node_else_this_host():
    groups = {"aorta_head": ["h"], "aorta_nodes": ["h", "n"]}
    assert run_head(groups, {"head": "n"}) == "n"  # aorta_exclude_unhealthy elected n
    assert run_head(groups, {}) == "h" and run_head(groups) == "h"
    assert run_head({"aorta_nodes": ["n", "h"]}) == "n"
    assert run_head({}, None, "me") == "me"
