# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""trace_parse in the controller's own Python (documented in plugins/modules/trace_parse.py).

Run as a module it would use the hosts' ansible_python_interpreter, which a cluster file's vars
often set for every host, implicit localhost included: a Python without msgspec (the slow
decoder), or without the Jinja2 that draws report.html. Here it runs where ansible-playbook runs.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aorta.cluster.plugins.module_utils._report import TASK_ARGUMENT_SPEC, run_task


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=TASK_ARGUMENT_SPEC)[1]
        outcome, failure = run_task(args, bool(self._task.check_mode or self._play_context.check_mode))
        result.update(outcome)
        if failure:
            result.update(failed=True, msg=failure)
        return result
