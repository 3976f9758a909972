# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one base of the collection's action plugins, as ansible.netcommon's ActionNetworkModule is
there: ``Step`` (every step), and ``ControllerTask``, a step whose work runs in the controller's own
Python from its checked arguments and what the run's nodes returned (trace_parse, combined_traces).

Private to this collection; controller side. No action plugin derives from another step's: what
several steps do on a node (wait for its supervisor, probe it, bring its traces home) is a mixin of
_node_work, beside this base.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _watch


class Step(ActionBase):
    """An action plugin of this collection. ``_variable``: a play variable templated (``default``
    when the play has none); ``_remote``: one shell command on the task's host, a lost connection
    raised as ``_watch.Unreachable`` (the watch and the waits count those)."""

    TRANSFERS_FILES = False

    def _variable(self, task_vars: Mapping[str, Any], name: str, default: Any = None) -> Any:
        return self._templar.template(task_vars[name]) if name in task_vars else default

    def _remote(self, command: str) -> dict[str, Any]:
        try:
            return self._low_level_execute_command(command, sudoable=False)
        except AnsibleConnectionFailure as exc:
            raise _watch.Unreachable(str(exc)) from None


class ControllerTask(Step):
    """A module's work done here: its arguments checked against ARGUMENT_SPEC, what the task left out
    taken from the nodes (``from_nodes``), what it is judged by (``judging``), then TASK(args,
    check_mode) returns (result, failure message or None); ``finish`` adds to a result that
    succeeded."""

    _requires_connection = False
    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = {}
    TASK: Callable[[dict[str, Any], bool], Any]
    # What from_nodes reads of each node.
    NODE_VARS: tuple[str, ...] = ()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)[1]
        task_vars = task_vars or {}
        groups = task_vars.get("groups") or {}
        nodes = _node_results.host_values(
            task_vars.get("hostvars") or {}, _node_results.nodes_of(groups), self.NODE_VARS, self._templar.template
        )
        found = self.from_nodes(task_vars, nodes, groups, frozenset(self._task.args))
        # from_nodes may find nothing to do (skipped) or no way to do it (failed), each with its reason.
        if "skipped" in found:
            result.update(changed=False, skipped=True, skip_reason=found["skipped"], msg=found["skipped"])
            return result
        if "failed" in found:
            result.update(changed=False, failed=True, msg=found["failed"])
            return result
        args.update(found)
        try:
            args.update(self.judging(task_vars, args, groups))
        except ValueError as exc:
            result.update(changed=False, failed=True, msg=str(exc))
            return result
        outcome, failure = self.TASK(args, bool(self._task.check_mode or self._play_context.check_mode))
        result.update(outcome)
        if failure:
            result.update(failed=True, msg=failure)
        else:
            result.update(self.finish(result))
        return result

    def from_nodes(
        self, task_vars: Mapping[str, Any], nodes: Mapping[str, Any], groups: Mapping[str, Any], given: Collection[str]
    ) -> dict[str, Any]:
        """What the task left out (not in ``given``), from ``nodes`` (NODE_VARS of each node)."""
        return {}

    def judging(self, task_vars: Mapping[str, Any], args: Mapping[str, Any], groups: Mapping[str, Any]) -> dict:
        """What the work is judged by, when it judges (raises ValueError naming a bad value)."""
        return {}

    def finish(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """What a result that succeeded gains."""
        return {}
