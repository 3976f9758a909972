# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.node_launch (documented in plugins/modules/node_launch.py)."""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

import yaml
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.action.node_prepare import excluded_nodes, head_file
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _health_verdict
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _launch, _plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt

display = Display()


class ActionModule(Step):
    TRANSFERS_FILES = True
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self._run(tmp, task_vars)
        if not result.get("failed") or self._task.check_mode:
            return result
        # Printed whole, a failed launch's result (its plan: argv, environment, docker run line, the
        # supervisor's answer) ran to thousands of characters: one line under _run.MESSAGE_MAX, the
        # result whole in the results directory's logs/ (run_record reads it back).
        task_vars = task_vars or {}
        try:
            results_dir = self._templar.template(task_vars.get("aorta_results_dir_resolved"))
        except AnsibleError:
            return result
        return _node_results.shorten_failure(result, results_dir, str(task_vars.get("inventory_hostname")), "launch")

    def _run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        # Nothing here connects to the node before it is known to run: ActionBase.run() opens the
        # connection (a transfer's temporary directory), and a node preflight excluded may be one that
        # does not answer at all.
        result: dict[str, Any] = {}
        task_vars = task_vars or {}
        self._vars = task_vars  # every module run below needs them (interpreter, connection)
        # The user interrupted the run on the controller before its ranks started: launch nothing
        # (the rescue tears down what preflight holds; run_record says STOPPED).
        stop = _interrupt.claim("before launch")
        if stop is not None:
            result.update(_interrupt.refused(stop))
            return result
        node = str(task_vars.get("inventory_hostname"))
        groups = task_vars.get("groups") or {}
        hostvars = task_vars.get("hostvars") or {}
        cluster = _settings.rank_order(self._templar.template, task_vars, groups.get("aorta_nodes") or [node])
        try:
            s = _settings.read(self._templar.template, task_vars, _plan.LAUNCH_NAMES)
            prepared = task_vars.get("aorta_prepare") or {}
            # The nodes that run, the same on every node: without those preflight excluded (unhealthy,
            # with aorta_exclude_unhealthy), ranks renumbered in cluster-file order, the head first.
            # From the files preflight left for the nodes it excluded, not from every node's variables.
            run = _plan.run_nodes(
                cluster,
                excluded_nodes(s["aorta_results_dir_resolved"], s["aorta_run_id_resolved"]),
                s["aorta_min_nodes"],
            )
            nodes, head = run["nodes"], run["head"]
            shared = {"head": head, "nnodes": len(nodes), "excluded_nodes": run["excluded"]}
            if node not in nodes:
                # Kept out of the run: its lease stays until node_end's teardown lets it go.
                result.update(changed=False, excluded=True, rank=None, **shared)
                return result
            result.update(super().run(tmp, task_vars))
            s["aorta_node_rank"] = nodes.index(node)
            plan, collect_dir = self._node_plan(s, node, nodes, head, cluster, hostvars, prepared)
        except (_settings.SettingsError, _launch.LaunchError, KeyError) as exc:
            result.update(failed=True, msg=f"{type(exc).__name__ if isinstance(exc, KeyError) else ''}{exc}")
            return result
        # The run's own ssh master, the one preflight opened (see _settings.bound_connection).
        _settings.bound_connection(self._connection, s["aorta_connect_timeout"], s["aorta_run_id_resolved"])
        if node == head:
            self._show_preflight(cluster, hostvars, plan, task_vars)
        row = self._row(node, s, plan)
        if self._task.check_mode and not int(task_vars.get("ansible_verbosity") or 0):
            # Once per node and only when asked for (--check; -v prints the result, which holds it):
            # printed on every run, it was some forty console lines per node.
            display.display(json.dumps(row, indent=4))
        result.update(self._planned(s, shared, row, plan, collect_dir))
        if self._task.check_mode:
            return result
        self._start(s, prepared, node, plan, hostvars, task_vars, result)
        return result

    def _node_plan(
        self,
        s: dict[str, Any],
        node: str,
        nodes: list[str],
        head: str,
        cluster: list[str],
        hostvars: Any,
        prepared: dict[str, Any],
    ) -> tuple[dict[str, Any], str | None]:
        """The node's plan on the head preflight's rendezvous port, and script mode's collect_dir (else None)."""
        verdict = head_file(s["aorta_results_dir_resolved"])
        seen = _settings.wait_json(verdict, 0, run_id=s["aorta_run_id_resolved"]) or {}
        if not seen.get("port"):
            # A launch without this run's preflight would rendezvous on a port nobody picked.
            raise _launch.LaunchError(
                f"launch: {verdict} holds no rendezvous port for run {s['aorta_run_id_resolved']}: "
                "aorta.cluster.node_prepare must pass on every node first"
            )
        if seen.get("head", head) != head:
            raise _launch.LaunchError(f"launch: {verdict} names the head {seen.get('head')}, the run's is {head}")
        head_vpc = self._templar.template(hostvars[head]["aorta_vpc_ip"]) if node != head else s["aorta_vpc_ip"]
        collect_dir = None
        # The mode follows the cluster file's node count, not the survivors': one node left must not
        # turn auto into script mode.
        mode = _launch.launch_mode(s["aorta_master_launch_mode"], len(cluster), s["aorta_training_overrides"])
        if mode == "script":
            collect_dir = self._script_mode(s, prepared, len(nodes))
        plan = _plan.node_launch(
            s,
            node,
            nodes,
            {"name": head, "vpc_ip": head_vpc, "port": seen.get("port") or 0},
            prepared,
            collect_dir,
            cluster_nodes=len(cluster),
        )
        return plan, collect_dir

    @staticmethod
    def _planned(
        s: dict[str, Any], shared: dict[str, Any], row: dict[str, Any], plan: dict[str, Any], collect_dir: str | None
    ) -> dict[str, Any]:
        """The result's keys for the node's plan: its rank, the run's nodes, and what the later steps read."""
        return dict(
            rank=s["aorta_node_rank"],
            **shared,
            plan=row,
            changed=False,
            container=plan["container"],
            launch_mode=plan["launch_mode"],
            run_dir=plan["run_dir"],
            collect_dir=plan["collect_dir"] if collect_dir is not None else None,
            nproc=plan["nproc"],
            master_addr=plan["master_addr"],
            master_port=plan["master_port"],
            deadlines=plan["deadlines"],
            # For the watch's progress line (a survey's overrides are text: read as the launch reads them).
            total_steps=_launch.override_of(s["aorta_training_overrides"], "training.max_steps"),
            # Where the head's supervisor and aggregator write, for the run's watch.
            status_path=f"{s['aorta_lease_dir']}/runs/{s['aorta_run_id_resolved']}.json",
            aggregate_path=f"{s['aorta_lease_dir']}/aggregates/{s['aorta_run_id_resolved']}.json",
        )

    def _start(
        self,
        s: dict[str, Any],
        prepared: dict[str, Any],
        node: str,
        plan: dict[str, Any],
        hostvars: Any,
        task_vars: dict[str, Any],
        result: dict[str, Any],
    ) -> None:
        """Into ``result``: the image and py-spy placed where missing, then the container and its supervisor started."""
        try:
            step = self._image(s, prepared, node) or self._pyspy(plan["pyspy"])
            if step:
                result.update(step)
                return
            job = self._supervise(plan, hostvars, task_vars, self._attach(prepared, result, hostvars))
        except AnsibleConnectionFailure as exc:
            result.update(failed=True, msg=f"launch: unreachable: {node}: {exc}")
            return
        if job.get("failed"):
            job.pop("invocation", None)  # it holds the module's arguments: the secret is no_log, the rest is noise
            result.update(job, failed=True, msg=job.get("msg", "the supervisor did not start"))
            return
        started = job.get("started") or {}
        result["started"] = {"start_floor": started.get("start_floor"), "container_id": started.get("container_id")}
        result.update(changed=True, job={"pid": job.get("pid"), "status_path": job.get("status_path")})

    def _attach(self, prepared: dict[str, Any], planned: dict[str, Any], hostvars: Any) -> dict[str, Any]:
        """What a watch re-attached from another controller reads back (aorta.cluster.run_attach): this
        node's probe and launch results and the run's start, kept on the node by its supervisor."""
        started = self._templar.template((hostvars.get("localhost") or {}).get("aorta_run_started_epoch"))
        return {
            "prepare": {k: v for k, v in prepared.items() if k != "invocation"},
            "launch": dict(planned),
            "run_started_epoch": started,
        }

    def _supervise(
        self, plan: dict[str, Any], hostvars: Any, task_vars: dict[str, Any], attach: dict[str, Any]
    ) -> dict[str, Any]:
        """The container started and its supervisor detached on the node, in one remote command."""
        supervisor = dict(plan["supervisor"])
        secret = self._templar.template(hostvars["localhost"]["aorta_run_secret_resolved"])
        supervisor["watch"] = dict(supervisor["watch"], secret=secret)
        # One remote command: the container's start, then the supervisor, detached on the node (its
        # own session): it runs past the node's deadline, grace, diagnostics and cleanup, and no
        # wrapper's limit ends it (Ansible's async wrapper cost a second Python start per node).
        container = {k: v for k, v in plan["container_args"].items() if k != "container"}
        return self._execute_module(
            module_name="aorta.cluster.run_supervisor",
            module_args=dict(supervisor, start=container, detach=True, attach=attach),
            task_vars=task_vars,
        )

    def _script_mode(self, s: dict[str, Any], prepared: dict[str, Any], nodes: int) -> str:
        """Aorta's launch_rocm.sh passes no --override: the run's files go where the config says.
        Not ``sample``: the traces a sampled run leaves on a node would share that directory with
        later runs, and a pull later would find them changed (``none`` pulls nothing later)."""
        mode, why = _collect_plan.of_run(s, nodes)
        if mode == "sample":
            raise _launch.LaunchError(
                f"aorta_collect_traces {mode} ({why}) needs the run-scoped output of torchrun mode; script mode "
                "writes to the config's output directory, shared with earlier runs. Use "
                "aorta_master_launch_mode=torchrun or aorta_collect_traces=all."
            )
        text = (((prepared.get("facts") or {}).get("read")) or {}).get("text") or ""
        try:
            config = yaml.safe_load(text) if text else {}
        except yaml.YAMLError as exc:
            raise _launch.LaunchError(f"{s['aorta_base_config']}: not YAML ({str(exc).splitlines()[0]})") from None
        # No overrides here: script mode with aorta_training_overrides is refused (_launch.launch_mode).
        return _launch.config_output_dir(config, s["aorta_container_mount_path"], s["aorta_base_config"])

    def _command(self, argv: list[str]) -> dict[str, Any]:
        return self._execute_module(
            module_name="ansible.legacy.command", module_args={"argv": argv}, task_vars=self._vars
        )

    def _image(self, s: dict[str, Any], prepared: dict[str, Any], node: str) -> dict[str, Any] | None:
        """Pull the image, or load it from the archive (air-gapped nodes), where the node lacks it."""
        if ((prepared.get("facts") or {}).get("image_id")) or prepared.get("skipped"):
            return None
        image, archive = str(s["aorta_docker_image"]), str(s["aorta_image_archive"] or "")
        if not archive:
            pulled = self._command(["docker", "pull", image])
            if pulled.get("rc"):  # docker's own line says why (the registry's answer, a name it does not know)
                said = str(pulled.get("stderr") or pulled.get("msg") or "").strip().splitlines()
                return {
                    "failed": True,
                    "msg": f"{node}: docker pull {image} failed: {said[-1] if said else 'no output'}",
                }
        else:
            remote = f"{str(s['aorta_image_archive_remote_dir']).rstrip('/')}/{os.path.basename(archive)}"
            self._connection.put_file(archive, remote)
            loaded = self._command(["docker", "load", "-q", "-i", remote])
            self._low_level_execute_command("rm -f -- " + shlex.quote(remote), sudoable=False)
            if loaded.get("rc"):
                return {"failed": True, "msg": f"Load the archive {archive} on {node}: {loaded.get('stderr', '')}"}
            display.display(f"{node}: loaded {image} from {archive}")
        check = self._command(["docker", "image", "inspect", "--format", "{{.Id}}", image])
        if check.get("rc"):
            how = f"loaded from {archive}" if archive else "pulled"
            return {
                "failed": True,
                "msg": f"{node}: {image} is not on the node after it was {how}: {check.get('stderr', '')}",
            }
        return None

    def _pyspy(self, pyspy: dict[str, Any]) -> dict[str, Any] | None:
        """py-spy into the node's tools directory, once per node (its name carries its hash), for a hang's stacks."""
        if not pyspy.get("source") or pyspy.get("present"):
            return None
        part = f"{pyspy['node_path']}.{os.getpid()}.part"
        self._connection.put_file(pyspy["source"], part)
        done = self._low_level_execute_command(
            f"chmod 0755 {shlex.quote(part)} && mv -f -- {shlex.quote(part)} {shlex.quote(pyspy['node_path'])}",
            sudoable=False,
        )
        if done.get("rc"):
            return {"failed": True, "msg": f"cannot place py-spy at {pyspy['node_path']}: {done.get('stderr', '')}"}
        return None

    @staticmethod
    def _row(node: str, s: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
        return {
            "node": f"{node} (rank {s['aorta_node_rank']}, {plan['launch_mode']})",
            "rendezvous": f"{plan['master_addr']}:{plan['master_port']}",
            "argv": plan["argv"],
            "environment": plan["environment"],
            "docker_run": " ".join(shlex.quote(str(arg)) for arg in plan["docker_run"]),
        }

    def _show_preflight(self, nodes: list[str], hostvars: Any, plan: dict[str, Any], task_vars: dict[str, Any]) -> None:
        """One line for the whole cluster, a line per node where an earlier run was cleaned up, and
        every node's own line with -v (a line per node on every run grew with N)."""
        verbose = int(task_vars.get("ansible_verbosity") or 0) > 0
        lines, interfaces, prints = [], [], {}
        for host in nodes:
            prepared = hostvars[host].get("aorta_prepare") or {}
            prints[host] = (prepared.get("derived") or {}).get("fingerprint")
            record = (prepared.get("derived") or {}).get("record") or {}
            lease = prepared.get("lease") or {}
            if record.get("fabric_if") and record["fabric_if"] not in interfaces:
                interfaces.append(record["fabric_if"])
            if verbose:
                lines.append(
                    f"{host}: fabric {record.get('fabric_ip')} on {record.get('fabric_if')}, "
                    f"docker {record.get('docker')}, "
                    f"image {'present' if record.get('image_present') else 'to load'}, "
                    f"{record.get('free_gib')} GiB free, clock offset {record.get('clock_offset_s')} s"
                )
            if lease.get("previous") is not None or lease.get("stopped") or lease.get("removed_containers"):
                lines.append(f"preflight[lease]: {host}: {lease.get('message', '')}")
        display.display(
            "\n".join(
                [
                    f"preflight: {len(nodes)} nodes ready; rendezvous {plan['master_addr']}:{plan['master_port']}; "
                    f"fabric interface {', '.join(interfaces)}",
                    *lines,
                    # One line per field that differs, whatever the node count (run.json names every node).
                    *_health_verdict.drift_lines(_health_verdict.drift(prints)),
                ]
            )
        )
