# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.run_start (documented in plugins/modules/run_start.py)."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

from ansible.errors import AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import in_rank_order, read_json_object
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import USER
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._run_id import (
    RunStartError,
    make_dirs,
    run_secret,
    start,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console, _interrupt

display = Display()

NAMES = ("aorta_run_id", "aorta_results_dir", "aorta_results_root")


def recorded_already(run_id: str, results_dir: str, purpose: str = "watch") -> str:
    """Why a watch re-attached to ``run_id``, or a run given that id, must not record it in
    ``results_dir``, or '': its run.json is there (the run ended and was recorded; another record
    would write its run.json, console log, junit.xml and history row over the first)."""
    path = os.path.join(results_dir, "run.json")
    if not os.path.exists(path):
        return ""
    document = read_json_object(path) or {}
    status = str(document.get("status") or "unreadable")
    why = str(document.get("message") or "")[:120]
    recorded = f"run {run_id} has ended and is recorded in {path} ({status}{': ' + why if why else ''})"
    again = f"To collect its traces again: ansible-playbook aorta.cluster.trace_collect -e aorta_run_id={run_id}"
    if purpose == "run":
        return (
            f"aorta_run_id: {recorded}; a new run writes nothing over it: leave aorta_run_id out (each run "
            f"makes its own) or give an id not used under the results root. {again}"
        )
    return (
        f"watch: {recorded}; a watch writes nothing over it. {again}; "
        "to watch it into another directory: -e aorta_results_dir=<new directory>"
    )


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS: frozenset[str] = frozenset(("purpose",))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            settings = {name: self._templar.template(task_vars.get(name, "")) for name in NAMES}
            facts = start(settings, dt.datetime.now(dt.timezone.utc), os.getcwd())
            purpose = str(self._task.args.get("purpose") or "run")
            # A collection adds its tree to a recorded run (that is what it is for); a run or a
            # watch would write a second record over the first.
            if purpose != "collect":
                refused = recorded_already(facts["aorta_run_id_resolved"], facts["aorta_results_dir_resolved"], purpose)
                if refused:
                    result.update(failed=True, msg=refused)
                    return result
            secret = run_secret(os.environ)
            changed = False
            made = not os.path.lexists(facts["aorta_results_dir_resolved"])
            if not self._task.check_mode:
                changed = make_dirs(facts["aorta_results_dir_resolved"])
            made = made and changed
        except (RunStartError, AnsibleError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        # Values, not ansible_facts: the role's set_fact keeps them as play variables (an action's
        # facts would be host facts, which ansible-core 2.24 stops injecting as top-level names).
        # Once for the run (every host's variables read once): the nodes' steps read this order
        # instead of every node's variables each (_settings.rank_order).
        nodes = [str(n) for n in (task_vars.get("groups") or {}).get("aorta_nodes") or []]
        order = in_rank_order(self._templar.template, task_vars.get("hostvars") or {}, nodes)
        # The secret goes only to the role's set_fact (no_log) and the supervisors' no_log option: a
        # result that holds it is never shown (only a failure, which holds no secret, is).
        result.update(
            changed=changed,
            aorta_results_dir_made=made,
            aorta_rank_order=order,
            aorta_run_secret_resolved=secret,
            _ansible_no_log=True,
            **facts,
        )
        run, where = facts["aorta_run_id_resolved"], facts["aorta_results_dir_resolved"]
        _interrupt.note_run(run, len(nodes))  # what a Ctrl-C's lines say about this run
        _console.printer(where, display.display)(f"run {run} on {len(nodes)} nodes; results in {where}")
        if not self._task.check_mode:
            result["variables_file"] = self.write_variables(task_vars, where, result)
        return result

    def write_variables(self, task_vars: dict[str, Any], results_dir: str, result: dict[str, Any]) -> str:
        """variables.json: every aorta_* variable this run uses, as templated here (what -e, the
        inventory and the defaults made of it), secrets masked; a warning when it cannot be written."""
        path = os.path.join(results_dir, "variables.json")
        if os.path.exists(path) and self._task.args.get("purpose") == "collect":
            return path  # the run's own, kept: a collection's variables are not the run's
        values = {}
        for name in sorted(USER):
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError:
                # Set later by the run itself (aorta_run_id_resolved ...): not the user's input.
                continue
        try:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(_console.effective_variables(values), handle, indent=2, sort_keys=True, default=str)
        except (OSError, AnsibleError, TypeError, ValueError) as exc:
            result.setdefault("warnings", []).append(f"{path} not written: {exc}")
            return ""
        return path
