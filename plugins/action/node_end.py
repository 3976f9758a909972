# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.node_end (documented in plugins/modules/node_end.py)."""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure, AnsibleError

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _node_summary
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import controller_identity
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan, _pull
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import READ_BY
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import override_of
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import run_head
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import (
    node_state,
    silent_reasons,
    torchrun_failure,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._node_work import NodeTransfer, NodeWait
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt

# The variables this step reads: the role trace_collect's, in roles/variables.yml.
NAMES = READ_BY["trace_collect"]

GONE_CONNECT_S = 10  # ssh's ConnectTimeout for a node the head counted as gone (its traces, if it is there)


def collect_floor(s: dict[str, Any], launch: dict[str, Any]) -> float:
    """The oldest modification time of a file the run wrote: aorta_collect_since when set, else the
    launch's start floor (the clock of the output directory when the container started)."""
    since = s["aorta_collect_since"]
    return float(since) if since is not None else float((launch.get("started") or {}).get("start_floor") or 0)


def _node_summary_path(results_dir: str, rank: int) -> str:
    """Where a node's summary file lands on the controller (kept: trace_parse reads it)."""
    return os.path.join(results_dir, "node_summaries", f"node_{int(rank)}.json.gz")


class ActionModule(NodeWait, NodeTransfer):
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        self._vars = task_vars  # every module run below needs them (interpreter, connection)
        # A stop the user asked for since the watch ended: collection carries on (what the ranks
        # wrote is kept); run.json says in which phase it came.
        _interrupt.claim("while collecting")
        node = str(task_vars.get("inventory_hostname"))
        nodes = (task_vars.get("groups") or {}).get("aorta_nodes") or [node]
        hostvars = task_vars.get("hostvars") or {}
        try:
            s = _settings.read(self._templar.template, task_vars, NAMES)
        except _settings.SettingsError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        watched = (hostvars["localhost"].get("aorta_watch") or {}) if "localhost" in hostvars else {}
        self._bind(s, node, watched)
        launch = task_vars.get("aorta_launch") or {}
        # The run's own head, ranks and node count: without the nodes preflight excluded.
        head = run_head(task_vars.get("groups"), launch, node)
        total_nodes = int(launch.get("nnodes") or len(nodes))
        if launch.get("rank") is not None:
            s["aorta_node_rank"] = int(launch["rank"])
        excluded = launch.get("excluded") or (task_vars.get("aorta_prepare") or {}).get("excluded")
        if excluded is True:
            return self._excluded(s, task_vars, node, result)
        seconds: dict[str, float] = {}  # where this node's end went: a slow node's collection shows
        wait = self._wait_for_run(s, launch, task_vars, node, head, total_nodes, watched, seconds)
        record = self._record(s, launch, task_vars, node, wait)
        # polls: the remote commands the wait made (one when the watch saw the run end).
        result.update(changed=False, node_result=record, polls=wait.get("polls", 0))
        self._finish(s, launch, task_vars, total_nodes, record, wait, seconds, result)
        return result

    def _bind(self, s: dict[str, Any], node: str, watched: dict[str, Any]) -> None:
        """The task's ssh bound to the run's connect timeout; a fresh, shorter one for a node counted as gone."""
        # A node the head counted as gone (its record, as the watch last read it: no file per node read
        # here) is asked over a new ssh master (the run's own may be stuck on a node that vanished: see
        # _settings.bound_connection), for GONE_CONNECT_S at most: its run has already failed, and a
        # node still there answers ssh in far less.
        gone_by_head = node in silent_reasons([watched.get("status") or {}])
        connect_s = min(int(s["aorta_connect_timeout"]), GONE_CONNECT_S) if gone_by_head else s["aorta_connect_timeout"]
        _settings.bound_connection(self._connection, connect_s, s["aorta_run_id_resolved"], fresh=gone_by_head)

    def _wait_for_run(
        self,
        s: dict[str, Any],
        launch: dict[str, Any],
        task_vars: dict[str, Any],
        node: str,
        head: str,
        total_nodes: int,
        watched: dict[str, Any],
        seconds: dict[str, float],
    ) -> dict[str, Any]:
        """The run's end as run_wait sees it (``{"skipped": True}``: nothing launched), timed in ``seconds``."""
        if launch.get("unreachable"):  # a re-attached watch could not reach it (run_attach): not asked again
            return {"node_unreachable": True, "status": {}, "polls": 0}
        results_dir = str(s["aorta_results_dir_resolved"])
        progress_dir = os.path.join(results_dir, ".progress") if results_dir else None
        lease_dir = str(s["aorta_lease_dir"])
        run_id = str(s["aorta_run_id_resolved"])
        wait: dict[str, Any] = {"skipped": True}
        started = time.monotonic()
        if launch.get("job"):
            args = {
                "status_path": f"{lease_dir}/runs/{run_id}.json",
                "timeout_seconds": launch["deadlines"]["wait_s"],
                "poll_seconds": max(int(s["aorta_poll_seconds"]), 1),
                "progress_dir": progress_dir,
                "total_nodes": total_nodes,
                # An AWX survey's overrides are text: read them the way the launch does.
                "total_steps": override_of(s["aorta_training_overrides"], "training.max_steps"),
                # A head the watch already found unreachable is asked once more, not three times.
                "unreachable_polls": 1 if watched.get("head_lost") and node == head else 3,
            }
            wait = self.wait(args, task_vars)
            seconds["wait"] = time.monotonic() - started
        return wait

    def _record(
        self, s: dict[str, Any], launch: dict[str, Any], task_vars: dict[str, Any], node: str, wait: dict[str, Any]
    ) -> dict[str, Any]:
        """The node's row in run.json: where it ran, how its run ended, and its state."""
        results_dir = str(s["aorta_results_dir_resolved"])
        status = wait.get("status") or {}
        record = {
            "name": node,
            "rank": s["aorta_node_rank"],
            "mgmt_ip": self._templar.template(task_vars.get("aorta_mgmt_ip", node)),
            "vpc_ip": s["aorta_vpc_ip"],
            "fabric_if": (((task_vars.get("aorta_prepare") or {}).get("derived") or {}).get("fabric_env") or {}).get(
                "GLOO_SOCKET_IFNAME", ""
            ),
            "container": launch.get("container"),
            "failure": torchrun_failure(status.get("log_tail") or ""),
            "progress": status.get("progress") or {},
            "node_errors": status.get("node_errors"),
            "fabric": status.get("fabric"),
            "link": status.get("link"),
            "fabric_sweep": status.get("fabric_sweep"),
            "cluster_stop": status.get("cluster_stop"),
            "silent_nodes": status.get("silent_nodes") or {},
            "capture_s": status.get("capture_s"),
            "capture_note": status.get("capture_note") or "",
            "log": f"{results_dir}/logs/{node}.log",
        }
        record.update(node_state(wait))
        return record

    def _finish(
        self,
        s: dict[str, Any],
        launch: dict[str, Any],
        task_vars: dict[str, Any],
        total_nodes: int,
        record: dict[str, Any],
        wait: dict[str, Any],
        seconds: dict[str, float],
        result: dict[str, Any],
    ) -> None:
        """Into ``result``: the node's teardown, its summary (aorta_collect_traces sample or none), its
        traces' collection (all; sample: the head's) or their listing where they stay, and the times.
        The collection's row (a line per file) is kept in a file here, not in the task result."""
        node = str(record["name"])
        gone = bool(wait.get("node_unreachable"))
        output = launch.get("collect_dir") or str(s["aorta_output_dir"])
        if not gone:
            started = time.monotonic()
            gone = self._end_on_node(s, launch, node, output, result)
            seconds["teardown"] = time.monotonic() - started
        mode, why = _collect_plan.of_run(s, total_nodes)
        result["collect_mode"] = {"mode": mode, "why": why}  # the report says it (trace_parse)
        if self._task.check_mode:
            result["seconds"] = {part: round(value, 3) for part, value in seconds.items()}
            return
        # The node's own summary of its traces where they are (sample, none): before the collection,
        # which may delete them (aorta_collect_delete_remote), and of the files the collection takes.
        if _collect_plan.summarised(mode) and not gone:
            started = time.monotonic()
            result["summary"] = self._summarise(s, launch, task_vars, output)
            seconds["summary"] = time.monotonic() - started
        if mode != "none":
            started = time.monotonic()
            if _collect_plan.takes_traces(mode, int(s["aorta_node_rank"])) or gone:
                row = self._collect(s, launch, record, output, gone, result.get("teardown_error", ""))
            else:
                row = self._on_node(s, launch, record, output, result.get("summary") or {})
            result["collect"] = _pull.keep_row(str(s["aorta_results_dir_resolved"]), row)
            seconds["collect"] = time.monotonic() - started
        result["seconds"] = {part: round(value, 3) for part, value in seconds.items()}

    def _summarise(self, s: dict[str, Any], launch: dict[str, Any], task_vars: dict[str, Any], output: str) -> dict:
        """The node's summary file made on the node (trace_summary), fetched into the results
        directory's node_summaries/ and checked against the node's sha256. ``{path, sha256, ...}`` (the
        analysis' figures), or ``{error}``."""
        run_id, rank = str(s["aorta_run_id_resolved"]), int(s["aorta_node_rank"])
        remote = f"{launch.get('run_dir') or s['aorta_path'] + '/.aorta-cluster/' + run_id}/summary.json.gz"
        results_dir = str(s["aorta_results_dir_resolved"])
        try:
            made = self._execute_module(
                module_name="aorta.cluster.trace_summary",
                module_args={
                    "root": f"{s['aorta_path']}/{output}",
                    "since": collect_floor(s, launch),
                    "include_unlinked_kernels": bool(s["aorta_include_unlinked_kernels"]),
                    "dest": remote,
                },
                task_vars=task_vars,
            )
        except AnsibleConnectionFailure as exc:
            return {"error": f"summary: unreachable: {exc}"}
        if made.get("failed"):
            return {"error": f"summary: {made.get('msg') or 'failed'}"}
        figures = dict(made.get("summary") or {})
        local = _node_summary_path(results_dir, rank)
        parallel = int(s["aorta_collect_parallel"])
        pulled = self._pull(remote, local, str(figures.get("sha256", "")), parallel, results_dir)
        if not pulled["ok"]:
            return {"error": f"summary: pull failed: {pulled['msg']}"}
        return dict(figures, remote=remote, path=local)

    def _on_node(
        self, s: dict[str, Any], launch: dict[str, Any], record: dict[str, Any], output: str, summary: dict[str, Any]
    ) -> dict[str, Any]:
        """The row of a node whose traces stay where they are (sample mode): every file the collection
        would take, with its size, sha256 and ranks, as the node listed them in its summary file; where
        they lie (root, since) for a pull later (playbooks/trace_collect.yml)."""
        local = _pull.staging_path(str(s["aorta_results_dir_resolved"]), int(s["aorta_node_rank"]))
        if summary.get("error") or not summary.get("path"):
            error = summary.get("error") or "no summary: the node's traces were neither analysed nor listed"
            return _pull.manifest_row(record, record["state"], None, local, error, {})
        try:
            files = _node_summary.read(summary["path"]).get("files") or []
        except ValueError as exc:
            return _pull.manifest_row(record, record["state"], None, local, str(exc), {})
        row = _pull.manifest_row(record, record["state"], {"files": files}, local, "", {})
        root, floor = f"{s['aorta_path']}/{output}", collect_floor(s, launch)
        return dict(row, on_node={"root": root, "since": floor, "aorta_path": s["aorta_path"]})

    def _excluded(self, s: dict[str, Any], task_vars: dict[str, Any], node: str, result: dict) -> dict[str, Any]:
        """A node preflight left out of the run (aorta_exclude_unhealthy): its lease let go, nothing
        collected; run.json names it with its reasons."""
        prepared = task_vars.get("aorta_prepare") or {}
        record = {
            "name": node,
            "rank": None,
            "state": "excluded",
            "exit_code": None,
            "reasons": prepared.get("failures") or [prepared.get("msg", "")],
            "log": None,
        }
        result.update(changed=False, node_result=record, polls=0)
        if prepared.get("reached", True):
            self._end_on_node(s, {}, node, str(s["aorta_output_dir"]), result)
        return result

    def _end_on_node(self, s: dict[str, Any], launch: dict[str, Any], node: str, output: str, result: dict) -> bool:
        """The node's log saved here, then this run's containers removed and the lease released
        (the supervisor does the same when it ends; this is the backstop). True when the node is gone."""
        results_dir = str(s["aorta_results_dir_resolved"])
        try:
            if launch.get("run_dir") and results_dir and not self._task.check_mode:
                os.makedirs(os.path.join(results_dir, "logs"), exist_ok=True)
                with contextlib.suppress(AnsibleError):
                    self._connection.fetch_file(f"{launch['run_dir']}/node.log", f"{results_dir}/logs/{node}.log")
            mount, run_id = str(s["aorta_container_mount_path"]).rstrip("/"), str(s["aorta_run_id_resolved"])
            released = self._execute_module(
                module_name="aorta.cluster.node_lease",
                module_args={
                    "run_id": run_id,
                    "directory": s["aorta_lease_dir"],
                    "state": "released",
                    "node_rank": int(s["aorta_node_rank"]),
                    "owner": controller_identity(),
                    "chown_paths": [f"{mount}/.aorta-cluster/{run_id}", f"{mount}/{output}"],
                },
                task_vars=self._vars,
            )
        except AnsibleConnectionFailure as exc:
            result["teardown_error"] = f"unreachable: {exc}"
            return True
        result["teardown"] = {k: released.get(k) for k in ("changed", "removed", "msg", "failed") if k in released}
        return False

    def _collect(
        self, s: dict[str, Any], launch: dict[str, Any], record: dict[str, Any], output: str, gone: bool, why: str
    ) -> dict[str, Any]:
        """The node's new files brought here (``fetch``), and with aorta_collect_delete_remote its
        output directory removed once they arrived verified."""
        if gone:
            local = _pull.staging_path(str(s["aorta_results_dir_resolved"]), int(s["aorta_node_rank"]))
            error = why or "unreachable during the run (not asked again)"
            return _pull.manifest_row(record, record["state"], None, local, error, {})
        row = self.fetch(s, record, f"{s['aorta_path']}/{output}", collect_floor(s, launch))
        if not row["error"] and row["files"]:
            self._delete_remote(s, launch)
        return row

    def _delete_remote(self, s: dict[str, Any], launch: dict[str, Any]) -> None:
        """aorta_collect_delete_remote, once the node's files arrived verified; never in script mode:
        the config's output directory holds earlier runs' files too."""
        if not s["aorta_collect_delete_remote"] or launch.get("collect_dir") is not None:
            return
        with contextlib.suppress(AnsibleError):
            self._low_level_execute_command(
                "rm -rf -- " + shlex.quote(f"{s['aorta_path']}/{s['aorta_output_dir']}"), sudoable=False
            )
