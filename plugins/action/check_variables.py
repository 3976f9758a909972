# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.check_variables (documented in plugins/modules/check_variables.py)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import partial_cluster
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._variables import RULES, check, unknown_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step


def _aorta_names(names: Any) -> list[str]:
    return [name for name in names if isinstance(name, str) and name.startswith("aorta_")]


class ActionModule(Step):
    _requires_connection = False

    def _name_sources(self, task_vars: dict[str, Any]) -> dict[str, list[str]]:
        """Where each aorta_* name was set: extra vars, this play, or a node's host and group vars
        (keys only: nothing is templated, and no node is contacted)."""
        manager = self._task.get_variable_manager()
        extra = _aorta_names(getattr(manager, "extra_vars", None) or {})
        sources = {"extra vars": extra, "play and role variables": _aorta_names(task_vars)}
        hostvars = task_vars.get("hostvars") or {}
        for host in (task_vars.get("groups") or {}).get("aorta_nodes", []):
            try:
                names = _aorta_names(hostvars[host].keys())
            except (KeyError, AnsibleError):
                continue
            sources[f"host or group vars of {host}"] = names
        return sources

    def _partial(self, task_vars: dict[str, Any]) -> str:
        """Why a job holding only some of the cluster file's nodes (a --limit, an AWX sliced job)
        must not start, or ''; no nodes at all is the inventory guard's to say."""
        nodes = (task_vars.get("groups") or {}).get("aorta_nodes") or []
        if not nodes:
            return ""
        first = (task_vars.get("hostvars") or {})[nodes[0]]
        return partial_cluster(len(nodes), self._templar.template(first.get("aorta_cluster_nodes")))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        # The cluster first, alone: a slice's message is the one thing to fix.
        problem = self._partial(task_vars)
        if problem:
            result.update(changed=False, failed=True, msg=problem, errors=[problem])
            return result
        values = {}
        for name in RULES:
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError:
                continue  # refers to what is not known yet; the roles' own checks see it later
        errors = check(values)
        site = values.get("aorta_site_variables")
        site = site if isinstance(site, list) else []
        errors += unknown_names(self._name_sources(task_vars), site)
        result.update(changed=False, checked=sorted(values), errors=errors)
        if errors:
            result.update(failed=True, msg="; ".join(errors))
        return result
