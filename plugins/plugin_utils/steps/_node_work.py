# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What several steps do on a node, each an ability derived from the one base (_step.Step), so that
no action plugin derives from another step's: ``NodeWait`` (wait for the node's supervisor to finish: run_wait,
node_end), ``NodeProbe`` (run node_probe there and judge its answer here: node_probe, node_prepare)
and ``NodeTransfer`` (bring the node's new files home, streamed over its ssh or packed and pulled:
node_end, trace_pull).

Private to this collection; controller side. Each mixin uses the action's own connection
(``_low_level_execute_command``, ``_execute_module``, ``_connection``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import sha256_file
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _health_verdict
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import (
    controller_identity,
    owner_is_gone,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._preflight import judge
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _pull, _stream
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._tools import pyspy_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _watch
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch._progress import named_silent

display = Display()

PULL_ATTEMPTS = 3  # a transient drop is retried; a pull that still fails is this node's error only
PULL_DELAY_S = 3
STREAM_TIMEOUT_S = 60  # for ssh to end once the stream is whole


def link_facts(derived: dict[str, Any], links: dict[str, Any]) -> None:
    """The fabric interface's link (speed, MTU, state, driver, error counters) into ``derived``, its
    speed and MTU into the fingerprint (with the health checks or without): a node whose link came
    up slower or with another MTU shows as drift."""
    link = links.get(str(derived.get("fabric_if") or ""))
    if not link:
        return
    derived["link"] = link
    fingerprint = derived.setdefault("fingerprint", {})
    fingerprint["link_speed_mbps"] = link.get("speed_mbps")
    fingerprint["link_mtu"] = link.get("mtu")
    if not fingerprint.get("nic_driver"):
        fingerprint["nic_driver"] = link.get("driver")


class NodeWait(Step):
    """Poll the node's status file until its supervisor finishes (plugin_utils/watch/_watch.py's
    ``node_wait``, the same loop as the head's watch), over the step's ``_remote``."""

    def wait(self, args: Any, task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """Poll the node's status file until its supervisor finishes (one read when it already has)."""
        poll = max(1, int(args.get("poll_seconds") or DEFAULTS["aorta_poll_seconds"]))
        progress_dir = str(args["progress_dir"]) if args.get("progress_dir") else None
        node = str((task_vars or {}).get("inventory_hostname", "node"))
        total_steps = int(args["total_steps"]) if args.get("total_steps") else None

        def gone() -> str | None:
            # The head already stopped the run for this node's silence: no need to ask again.
            return named_silent(progress_dir, node) if progress_dir else None

        seen = _watch.node_wait(
            _watch.reader(self._remote, _watch.long_poll_command(str(args["status_path"]), None, poll)),
            int(args["timeout_seconds"]),
            _watch.node_poll(progress_dir, node, int(args.get("total_nodes") or 1), total_steps, poll, display.display),
            lost_polls=int(args.get("unreachable_polls") or 3),
            poll_s=poll,
            gone=gone,
        )
        if seen["finished"]:
            if args.get("results_file"):
                with contextlib.suppress(AnsibleConnectionFailure):
                    self._low_level_execute_command(
                        "rm -f -- " + shlex.quote(str(args["results_file"])), sudoable=False
                    )
            seen["changed"] = False
        return seen


class NodeProbe(Step):
    """node_probe run on the node, its answer judged here (preflight's checks, the health verdict)."""

    def probe(self, args: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None) -> dict[str, Any]:
        """The module's answer, judged: ``derived`` (fabric, record, py-spy), and failed with every
        failure named. ``pyspy``: a py-spy plan made once for the run, instead of O(pyspy)'s setting."""
        expect = args.pop("expect", None) or {}
        answer, pyspy = self.execute(args, task_vars, pyspy)
        return self.judged(answer, expect, task_vars, pyspy)

    def execute(
        self, args: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None
    ) -> tuple[dict[str, Any], Any]:
        """The module's answer as the node gave it (``_answered``: the controller's clock when it
        arrived), and the py-spy plan its tools were checked against (None without O(pyspy))."""
        if "pyspy" in args:  # the controller's py-spy: the node says whether it has this very binary
            lease_dir = (args.get("lease") or {}).get("directory") or "/var/tmp/aorta-cluster"
            setting = args.pop("pyspy")
            pyspy = pyspy if pyspy is not None else pyspy_plan(setting, f"{lease_dir.rstrip('/')}/tools")
            if pyspy["source"]:
                args["tools"] = [{"name": "py-spy", "path": pyspy["node_path"], "size": pyspy["size"]}]
        if args.get("lease") and not args["lease"].get("owner"):
            args["lease"] = dict(args["lease"], owner=controller_identity())
        probe = self._execute_module(module_name="aorta.cluster.node_probe", module_args=args, task_vars=task_vars)
        holder = probe.get("holder") or {}
        if probe.get("failed") and owner_is_gone(holder.get("owner", "")):
            # Held for an ansible-playbook of this controller that has died (Ctrl-C, SIGKILL): nobody
            # will collect that run; the node stops it now instead of at its deadline.
            args["lease"] = dict(args["lease"], gone_owner=holder["owner"])
            probe = self._execute_module(module_name="aorta.cluster.node_probe", module_args=args, task_vars=task_vars)
        probe["_answered"] = time.time()
        return probe, pyspy

    @staticmethod
    def judged(
        probe: dict[str, Any], expect: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None
    ) -> dict[str, Any]:
        """An answer of ``execute`` judged against ``expect`` (``_preflight.judge``, the health verdict)."""
        result = dict(probe)
        after = result.pop("_answered", time.time())
        if probe.get("failed") or "facts" not in probe:
            return result
        result["facts"] = facts = dict(probe["facts"])
        node = str((task_vars or {}).get("inventory_hostname", "node"))
        verdict = judge(node, facts, expect)
        health = facts.get("health")
        verdict["failures"].extend(_health_verdict.judge(node, health, expect))
        derived = verdict["derived"]
        if health:
            derived["health"] = _health_verdict.summary(health)
            derived["fingerprint"] = health.get("fingerprint") or {}
        # Only the fabric interface's link is kept: every node's result is read at the record.
        link_facts(derived, facts.pop("links", None) or {})
        if pyspy is not None:
            derived["pyspy"] = dict(pyspy, present=bool(facts.get("tools", {}).get("py-spy")))
        # The node reads its clock last, just before it answers: against the controller's clock when
        # the answer arrived, the error is the return trip (milliseconds), not the module's run time.
        derived.setdefault("record", {})["clock_offset_s"] = round(facts["clock"] - after, 3)
        result["derived"] = derived
        if verdict["failures"]:
            result.update(failed=True, msg="; ".join(verdict["failures"]), failures=verdict["failures"])
        return result


class NodeTransfer(Step):
    """A node's new files brought into the run's staging, over the node's own connection. The
    action sets ``self._vars`` (its task_vars) before ``fetch``."""

    _vars: dict[str, Any]

    def fetch(self, s: dict[str, Any], record: dict[str, Any], root: str, floor: float) -> dict[str, Any]:
        """The files under the node's ``root`` modified at or after ``floor``, streamed over the
        node's ssh (else packed there and pulled), into the results directory's staging; the node's
        manifest row. ``s``: aorta_results_dir_resolved, aorta_node_rank, aorta_run_id_resolved,
        aorta_path, aorta_collect_compression, aorta_collect_parallel."""
        results_dir = str(s["aorta_results_dir_resolved"])
        local = _pull.staging_path(results_dir, int(s["aorta_node_rank"]))
        argv = self._stream_argv(s, root, floor)
        if argv is not None:
            return self._streamed(s, record, argv, local)
        remote = f"{s['aorta_path']}/.aorta-cluster/{s['aorta_run_id_resolved']}/traces.tar"
        try:
            pack = self._execute_module(
                module_name="aorta.cluster.trace_pack",
                module_args={
                    "root": root,
                    "since": floor,
                    "archive": remote,
                    "compression": s["aorta_collect_compression"],
                },
                task_vars=self._vars,
            )
        except AnsibleConnectionFailure as exc:
            return _pull.manifest_row(record, record["state"], None, local, f"unreachable: {exc}", {})
        if pack.get("failed"):
            return _pull.manifest_row(record, record["state"], None, local, str(pack.get("msg") or "pack failed"), {})
        if pack.get("archive") is None:
            # Nothing new on the node (trace_pack packs no archive for no file): collected, with no
            # file, as CVS and the earlier role record it; not a failure.
            return _pull.manifest_row(record, record["state"], pack, local, "", {})
        pull = self._pull(
            remote, local, str(pack.get("archive_sha256", "")), int(s["aorta_collect_parallel"]), results_dir
        )
        error = "" if pull["ok"] else f"pull failed: {pull['msg']}"
        with contextlib.suppress(AnsibleError):
            self._low_level_execute_command("rm -f -- " + shlex.quote(remote), sudoable=False)
        return _pull.manifest_row(record, record["state"], pack, local, error, pull)

    def _stream_argv(self, s: dict[str, Any], root: str, floor: float) -> list[bytes] | None:
        """The ssh command that streams this node's files, over the task's own ssh connection (its
        options and control socket); None where that cannot be done (another connection plugin, a
        password to type), and the node packs an archive that is then fetched instead."""
        connection = self._connection
        if getattr(connection, "transport", "") != "ssh" or not hasattr(connection, "_build_command"):
            return None
        try:
            if connection.get_option("password") or self._play_context.password:
                return None
            python = str(self._templar.template(self._interpreter()) or "python3")
            if python.startswith("auto"):
                python = "python3"
            command = _stream.remote_command(python, root, floor, str(s["aorta_collect_compression"]))
            return connection._build_command(connection.get_option("ssh_executable"), "ssh", connection.host, command)
        except (AnsibleError, KeyError, AttributeError):
            return None

    def _interpreter(self) -> Any:
        """The node's ansible_python_interpreter (a delegated task's: its node's, not the controller's)."""
        return self._vars.get("ansible_python_interpreter")

    def _streamed(self, s: dict[str, Any], record: dict[str, Any], argv: list[bytes], local: str) -> dict[str, Any]:
        """Pack, transfer and unpack at once (plugin_utils/collect/_stream.py), at most aorta_collect_parallel
        nodes at a time; a dropped stream is retried whole."""
        results_dir = str(s["aorta_results_dir_resolved"])
        tree = _pull.staging_tree(results_dir, int(s["aorta_node_rank"]))

        def stream() -> dict[str, Any]:
            try:
                return _stream.pull(argv, tree, STREAM_TIMEOUT_S)
            except _stream.StreamError as exc:
                raise _pull.PullError(str(exc)) from None

        pull = _pull.attempts(
            stream, self._slots(results_dir), int(s["aorta_collect_parallel"]), PULL_ATTEMPTS, PULL_DELAY_S
        )
        if not pull["ok"]:
            return _pull.manifest_row(record, record["state"], None, local, f"pull failed: {pull['msg']}", pull)
        got = pull["value"]
        pack = {"files": got["files"], "compression": got["compression"]}
        row = _pull.manifest_row(record, record["state"], pack, local, "", pull)
        return dict(row, tree=tree, arrived=got["arrived"])

    @staticmethod
    def _slots(results_dir: str) -> str:
        return os.path.join(results_dir, ".staging", ".slots")

    def _pull(self, remote: str, local: str, sha256: str, parallel: int, results_dir: str) -> dict[str, Any]:
        """The archive pulled over the node's own connection, checked against the node's hash; at
        most ``parallel`` nodes at once (a lock file per slot)."""
        os.makedirs(os.path.dirname(local), exist_ok=True)

        def fetch() -> None:
            try:
                self._connection.fetch_file(remote, local)
            except AnsibleError as exc:
                raise _pull.PullError(str(exc)) from None
            got = sha256_file(local)
            if sha256 and got != sha256:
                raise _pull.PullError(f"the archive's sha256 is {got}, the node packed {sha256}")

        return _pull.attempts(fetch, self._slots(results_dir), parallel, PULL_ATTEMPTS, PULL_DELAY_S)
