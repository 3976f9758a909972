# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.trace_pull (documented in plugins/modules/trace_pull.py).

node_end's own transfer (its stream over the node's ssh, else its pack and fetch), for one node
whose traces the manifest lists on_node, into the run's existing combined_traces.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _combined
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._node_work import NodeTransfer

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "why": {"type": "str", "default": "asked"},
    "traces_dir": {"type": "path"},
}


class ActionModule(NodeTransfer):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        task_vars = task_vars or {}
        self._vars = task_vars
        node = str(args["node"])
        results_dir = str(self._var(task_vars, "aorta_results_dir_resolved") or "")
        dest = str(args["traces_dir"] or (f"{results_dir}/combined_traces" if results_dir else ""))
        manifest = _combined.current_manifest(dest) if dest else None
        entry = next((e for e in (manifest or {}).get("nodes") or [] if e.get("name") == node), None)
        if entry is None:
            result.update(failed=True, node=node, msg=f"trace_pull: {node} is not a node of {dest}/manifest.json")
            return result
        result.update(changed=False, node=node, rank=entry["rank"])
        if entry.get("collected"):
            result["msg"] = f"{node}: its traces are already in {dest}"
            return result
        if not entry.get("on_node"):
            why = entry.get("error") or "no error recorded"
            result.update(failed=True, msg=f"{node}: not collected ({why}) and not listed on its node: collect again")
            return result
        if self._task.check_mode:
            return result
        started = time.monotonic()
        where = entry["on_node"]
        work = os.path.join(os.path.dirname(dest), ".pull")  # this pull's staging and its slots, removed after
        s = {
            "aorta_results_dir_resolved": work,
            "aorta_node_rank": int(entry["rank"]),
            "aorta_run_id_resolved": str((manifest or {}).get("run_id") or "pull"),
            "aorta_path": where.get("aorta_path") or DEFAULTS.get("aorta_path"),
            "aorta_collect_compression": self._var(task_vars, "aorta_collect_compression"),
            "aorta_collect_parallel": 1,
        }
        record = {key: entry.get(key) for key in ("rank", "name", "mgmt_ip", "vpc_ip", "state")}
        # The node's ssh bound to aorta_connect_timeout, as every node step's (a fresh master: the
        # run's own is gone by now).
        connect_s = self._var(task_vars, "aorta_connect_timeout")
        _settings.bound_connection(self._connection, connect_s, str(s["aorta_run_id_resolved"]), fresh=True)
        try:
            fetched = self.fetch(s, record, str(where["root"]), float(where.get("since") or 0))
            if fetched["error"]:
                result.update(failed=True, msg=f"{node}: {fetched['error']}")
                return result
            pulled, error = _combined.adopt_pulled(dest, node, fetched, str(args["why"]))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if error:
            result.update(failed=True, msg=error)
            return result
        files = (pulled or {}).get("files") or []
        result.update(
            changed=True,
            files=len(files),
            bytes=sum(int(f.get("size") or 0) for f in files),
            seconds=round(time.monotonic() - started, 3),
        )
        return result

    def _var(self, task_vars: dict[str, Any], name: str) -> Any:
        """The play's value of ``name``, else (unset, empty or not templatable) the vocabulary's
        default: this task may run outside the collection's plays (trace_collect.yml's pull)."""
        try:
            value = self._templar.template(task_vars[name]) if name in task_vars else None
        except AnsibleError:
            value = None
        return DEFAULTS.get(name) if value in (None, "") else value

    def _interpreter(self) -> Any:
        """The delegated node's ansible_python_interpreter (the task's own vars are the controller's)."""
        node = str(self._task.args.get("node"))
        delegated = (self._vars.get("ansible_delegated_vars") or {}).get(node) or {}
        if "ansible_python_interpreter" in delegated:
            return delegated["ansible_python_interpreter"]
        return ((self._vars.get("hostvars") or {}).get(node) or {}).get("ansible_python_interpreter")
