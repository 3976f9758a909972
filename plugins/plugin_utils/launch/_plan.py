# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's launch plan, and the run's deadlines it carries (controller side).

Private to this collection. The deadlines' arithmetic, and every other time bound of a run, is in
module_utils/node_runtime/_time_bounds.py (the supervisor on the node reads the same module); launch_deadlines
below is its controller-side caller, which says a bad value as a LaunchError. node_launch detaches the supervisor itself
(run_supervisor's detach): no wrapper limits it there; async_s is the limit for a user who runs
run_supervisor under Ansible's async instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep_phase, _time_bounds
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import GROUP_ALL, GROUP_HEAD
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import READ_BY
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _docker_run, _launch
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError


def launch_deadlines(
    timeout_seconds: Any,
    grace_seconds: Any,
    setup_timeout_seconds: Any,
    heartbeat_timeout_seconds: Any,
) -> dict[str, int]:
    """Seconds for each bound, from aorta_timeout_seconds, aorta_kill_grace_seconds,
    aorta_setup_timeout_seconds and aorta_heartbeat_timeout (every caller passes it: its one default
    is the role aorta.cluster.defaults'); see ``_time_bounds.deadlines`` for each bound."""
    try:
        return _time_bounds.deadlines(timeout_seconds, grace_seconds, setup_timeout_seconds, heartbeat_timeout_seconds)
    except _time_bounds.BoundError as exc:
        raise LaunchError(f"launch_deadlines: {exc}") from None


# What node_launch reads (the plan below and its own steps): the role container_launch's variables,
# in roles/variables.yml.
LAUNCH_NAMES = READ_BY["container_launch"]


class _NodeRun(NamedTuple):
    """One node's share of the run: its rank, names, directories, launch mode and deadlines."""

    rank: int
    run_id: str
    mount: str
    path: str
    mode: str
    nproc: int
    deadlines: dict[str, int]
    output: str
    container: str
    run_dir: str
    run_dir_in: str
    diagnostics_in: str


def _node_run(s: Mapping[str, Any], nnodes: int, collect_dir: str | None, cluster_nodes: int | None) -> _NodeRun:
    """The node's rank, names, directories, launch mode and deadlines, read from the run's settings."""
    rank = int(s["aorta_node_rank"])
    run_id = str(s["aorta_run_id_resolved"])
    mount = str(s["aorta_container_mount_path"]).rstrip("/") or "/"
    path = str(s["aorta_path"])
    # The cluster file's node count decides auto (``cluster_nodes``): excluded nodes do not change it.
    mode = _launch.launch_mode(s["aorta_master_launch_mode"], cluster_nodes or nnodes, s["aorta_training_overrides"])
    nproc = int(s["aorta_nproc_per_node"] or s["aorta_gpus_per_node"])
    deadlines = launch_deadlines(
        s["aorta_timeout_seconds"],
        s["aorta_kill_grace_seconds"],
        s["aorta_setup_timeout_seconds"],
        s["aorta_heartbeat_timeout"],
    )
    output = str(collect_dir if collect_dir is not None else s["aorta_output_dir"])
    container = f"{s['aorta_docker_container_name']}-{run_id}"
    return _NodeRun(
        rank,
        run_id,
        mount,
        path,
        mode,
        nproc,
        deadlines,
        output,
        container,
        # One directory per node: aorta_path may be shared (NFS), and each node's launch.sh differs.
        run_dir=f"{path}/.aorta-cluster/{run_id}/node_{rank}",
        run_dir_in=f"{mount}/.aorta-cluster/{run_id}/node_{rank}",
        diagnostics_in=f"{mount}/{output}/diagnostics/node_{rank}",
    )


def _docker_run_argv(s: Mapping[str, Any], r: _NodeRun, facts: Mapping[str, Any]) -> list[str]:
    """The ``docker run`` argv of the node's container."""
    return _docker_run.docker_run_argv(
        {
            "name": r.container,
            "image": s["aorta_docker_image"],
            "labels": {"aorta.cluster.run": r.run_id, "aorta.cluster.node_rank": r.rank},
            "network": s["aorta_docker_network_mode"],
            "ipc": "host",
            "shm_size": s["aorta_docker_shm_size"],
            "privileged": bool(s["aorta_docker_privileged"]),
            "ulimits": s["aorta_docker_ulimits"],
            "group_ids": facts.get("group_ids") or [],
            "devices": facts.get("container_devices") or [],
            "mount_source": r.path,
            "mount_target": r.mount,
            "lifetime_seconds": r.deadlines["container_lifetime_s"],
        }
    )


def _environment(s: Mapping[str, Any], r: _NodeRun, derived: Mapping[str, Any]) -> dict[str, Any]:
    """The launch's environment: the run's, the node's fabric interface and the flight recorder's."""
    return _launch.base_env(
        s["aorta_environment"],
        s["aorta_rccl_build_path"],
        s["aorta_extra_env"],
        derived.get("fabric_env") or {},
        {"entries": s["aorta_flight_recorder_entries"], "dump_dir": r.diagnostics_in},
    )


def _launch_argv(s: Mapping[str, Any], r: _NodeRun, nnodes: int, master: str, port: int) -> list[str]:
    """The command the container runs: torchrun's, or script mode's experiment script."""
    if r.mode == "torchrun":
        return _launch.torchrun_argv(
            {
                "torchrun": s["aorta_torchrun"],
                "nnodes": nnodes,
                "node_rank": r.rank,
                "nproc_per_node": r.nproc,
                "master_addr": master,
                "master_port": port,
                "extra_torchrun_args": s["aorta_extra_torchrun_args"],
                "train_script": f"{r.mount}/{s['aorta_train_script']}",
                "config": f"{r.mount}/{s['aorta_base_config']}",
                "output_dir": s["aorta_output_dir"],
                "overrides": s["aorta_training_overrides"],
                "extra_train_args": s["aorta_extra_train_args"],
            }
        )
    return ["bash", f"{r.mount}/{s['aorta_experiment_script']}", f"{r.mount}/{s['aorta_base_config']}"]


def _watch(
    node: str, nodes: Sequence[str], head: Mapping[str, Any], master: str, port: int, deadlines: Mapping[str, int]
) -> dict[str, Any]:
    """The supervisor's watch arguments, all but the run's secret (which only the action adds)."""
    return {
        "node": node,
        "head": str(head["name"]),
        "nodes": list(nodes) if node == head["name"] else [],
        "head_address": master,
        "port": port,
        "heartbeat_timeout": deadlines["heartbeat_timeout_s"],
        "join_timeout": deadlines["join_s"],
        "stopping_timeout": deadlines["stopping_s"],
    }


def _supervisor(s: Mapping[str, Any], r: _NodeRun, script: str) -> dict[str, Any]:
    """run_supervisor's arguments, without the watch's, py-spy's and the fabric check's."""
    return {
        "run_id": r.run_id,
        "container": r.container,
        "command": ["bash", f"{r.run_dir_in}/launch.sh"],
        "script_path": f"{r.run_dir}/launch.sh",
        "script": script,
        "timeout_seconds": r.deadlines["timeout_s"],
        "grace_seconds": r.deadlines["grace_s"],
        "diagnose_seconds": r.deadlines["diagnose_s"],
        "diagnostics_dir": r.diagnostics_in if s["aorta_diagnose"] else "",
        "kernel_log": bool(s["aorta_kernel_log_scan"]),
        "directory": s["aorta_lease_dir"],
        "log": f"{r.run_dir}/node.log",
        "progress_dir": f"{r.path}/{r.output}",
        "ranks": list(range(r.rank * r.nproc, (r.rank + 1) * r.nproc)),
        "chown_paths": [f"{r.mount}/.aorta-cluster/{r.run_id}", f"{r.mount}/{r.output}"],
    }


def _fabric(s: Mapping[str, Any], fabric_if: str, head: Mapping[str, Any], port: int) -> dict[str, Any]:
    """The supervisor's fabric check, asked only when the run goes wrong."""
    # Tells a node that lost its link from the peers that waited for it.
    return {
        "interface": fabric_if,
        "address": s["aorta_vpc_ip"],
        "head_address": head.get("vpc_ip"),
        "head_port": port,
    }


def fabric_sweep(s: Mapping[str, Any]) -> dict[str, Any] | None:
    """The supervisor's fabric sweep (run_supervisor's watch.sweep), None when it is off."""
    seconds = float(s["aorta_fabric_sweep_seconds"] or 0)
    if not s["aorta_fabric_sweep"] or seconds <= 0:
        return None
    return {
        "address": s["aorta_vpc_ip"],
        "seconds": seconds,
        "tool": str(s["aorta_fabric_sweep_tool"]),
        "threshold": float(s["aorta_fabric_slow_threshold"]),
        "min_gbps": float(s["aorta_fabric_min_gbps"] or 0),
    }


def _container_args(s: Mapping[str, Any], r: _NodeRun, docker_run: list[str]) -> dict[str, Any]:
    """run_supervisor's ``start`` arguments (with the container's name), that start the container."""
    output_in = f"{r.mount}/{r.output}"
    return {
        "container": r.container,
        "run_argv": docker_run,
        "run_dir": r.run_dir,
        "mount_source": r.path,
        # The run's directory, the output directory, and where torch's flight recorder dumps on
        # its own (NCCL watchdog timeout) and the capture writes: proven writable by the container's root.
        "writable": [r.run_dir_in, output_in, r.diagnostics_in],
        "floor_dir": {"container": output_in, "host": f"{r.path}/{r.output}"},
        "build": [] if s["aorta_skip_rccl_build"] else ["bash", f"{r.mount}/{s['aorta_build_script']}"],
    }


def node_launch(
    s: Mapping[str, Any],
    node: str,
    nodes: Sequence[str],
    head: Mapping[str, Any],
    prepared: Mapping[str, Any],
    collect_dir: str | None = None,
    cluster_nodes: int | None = None,
) -> dict[str, Any]:
    """Everything one node's launch needs, from the run's settings ``s`` (aorta_* values),
    the node's name, the cluster's nodes in rank order, the head (``name``, ``vpc_ip``, ``port``) and
    this node's preflight result ``prepared`` (``facts``, ``derived``); ``collect_dir``: where script
    mode's experiment script writes, relative to aorta_path (None: the run's aorta_output_dir).

    Returns the container's name and ``docker run`` argv, the run and diagnostics directories, the
    launch mode, rendezvous, nproc, deadlines, argv, environment and launch script, and the
    supervisor's arguments (all but the run's secret, which only the action adds)."""
    r = _node_run(s, len(nodes), collect_dir, cluster_nodes)
    facts = prepared.get("facts") or {}
    derived = prepared.get("derived") or {}
    docker_run = _docker_run_argv(s, r, facts)
    master = _launch.master_addr(s["aorta_master_addr"], head.get("vpc_ip"), str(head["name"]))
    port = int(head["port"])
    env = _environment(s, r, derived)
    argv = _launch_argv(s, r, len(nodes), master, port)
    fabric_if = derived.get("fabric_if") or ""
    pyspy = derived.get("pyspy") or {}
    script = _launch.launch_script(argv, env, r.mount, f"{r.run_dir_in}/node.log")
    supervisor = _supervisor(s, r, script)
    # The head watches the run: every node reports to it; it stops every node when one fails or goes silent.
    supervisor["watch"] = _watch(node, nodes, head, master, port, r.deadlines)
    # A run no controller watches any more (an AWX cancel: SIGKILL) is stopped by its head after
    # this long; 0 keeps it to its deadline (plugin_utils/watch/_interrupt.py stops a Ctrl-C at once).
    supervisor["watch"]["orphan_grace"] = int(s["aorta_orphan_grace_seconds"] or 0)
    sweep = fabric_sweep(s)
    if sweep:
        supervisor["watch"]["sweep"] = sweep
        # Every node joins, then the sweep runs before the go: the wait for the go is that much longer.
        supervisor["watch"]["join_timeout"] += math.ceil(_sweep_phase.bound_s(sweep["seconds"]))
    if pyspy.get("source"):
        supervisor.update(pyspy_path=pyspy["node_path"], pyspy_sha256=pyspy["sha256"])
    if fabric_if:
        supervisor["fabric"] = _fabric(s, fabric_if, head, port)
    return {
        "container": r.container,
        "launch_mode": r.mode,
        "run_dir": r.run_dir,
        "collect_dir": r.output,
        "nproc": r.nproc,
        "master_addr": master,
        "master_port": port,
        "deadlines": r.deadlines,
        "argv": argv,
        "environment": env,
        "docker_run": docker_run,
        "container_args": _container_args(s, r, docker_run),
        "supervisor": supervisor,
        "pyspy": pyspy,
    }


def run_nodes(
    nodes: Sequence[str], prepared: Mapping[str, Mapping[str, Any] | None], min_nodes: int = 1
) -> dict[str, Any]:
    """The nodes this run launches on, computed the same on every node from every node's preflight:
    the cluster's nodes in cluster-file order without those preflight excluded (``excluded`` in their
    result, with ``aorta_exclude_unhealthy``), the head first. ``{nodes, head, excluded: [{name,
    reasons}]}``; a LaunchError naming every excluded node when fewer than ``min_nodes`` remain."""
    kept, excluded = [], []
    for name in nodes:
        answer = prepared.get(name) or {}
        if answer.get("excluded"):
            reasons = [str(r) for r in answer.get("failures") or ()] or [str(answer.get("msg") or "excluded")]
            excluded.append({"name": str(name), "reasons": reasons})
        else:
            kept.append(str(name))
    need = max(int(min_nodes or 1), 1)
    if len(kept) < need:
        named = "; ".join(item["reasons"][0] for item in excluded[:10])
        more = f" and {len(excluded) - 10} more" if len(excluded) > 10 else ""
        raise _launch.LaunchError(
            f"launch: {len(kept)} of {len(nodes)} nodes passed preflight, aorta_min_nodes is {need}: {named}{more}"
        )
    return {"nodes": kept, "head": kept[0], "excluded": excluded}


def run_head(groups: Mapping[str, Any] | None, launch: Mapping[str, Any] | None = None, fallback: str = "") -> str:
    """The run's head, found in one place: the node the launch elected (``launch``: any node's
    ``aorta_launch``, which records ``head``; with aorta_exclude_unhealthy the first node that passed
    preflight, ``run_nodes``), else the cluster file's (the group aorta_head, else the first of
    aorta_nodes), else ``fallback`` (a task outside the collection's plays: its own host)."""
    chosen = (launch or {}).get("head")
    if chosen:
        return str(chosen)
    groups = groups or {}
    heads = groups.get(GROUP_HEAD) or groups.get(GROUP_ALL) or [fallback]
    return str(heads[0])
