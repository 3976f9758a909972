# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""trace_parse in the controller's own Python (documented in plugins/modules/trace_parse.py).

Run as a module it would use the hosts' ansible_python_interpreter, which a cluster file's vars
often set for every host, implicit localhost included: a Python without msgspec (the slow
decoder), or without the Jinja2 that draws report.html. Here it runs where ansible-playbook runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aorta.cluster.plugins.module_utils._report import TASK_ARGUMENT_SPEC, run_task


class ActionModule(ActionBase):
    """A module's work done here: its arguments checked against ARGUMENT_SPEC, then TASK(args,
    check_mode) returns (result, failure message or None). combined_traces does the same with its own."""

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC: dict[str, Any] = TASK_ARGUMENT_SPEC
    TASK: Callable[[dict[str, Any], bool], Any] = staticmethod(run_task)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)[1]
        outcome, failure = self.TASK(args, bool(self._task.check_mode or self._play_context.check_mode))
        result.update(outcome)
        if failure:
            result.update(failed=True, msg=failure)
        return result
