# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.say (documented in plugins/modules/say.py)."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console

display = Display()


def lines_of(msg: Any) -> list[str]:
    """A message as console lines: a string's own lines, a list's items (None and empty left out)."""
    items = msg if isinstance(msg, (list, tuple)) else [msg]
    return [line for item in items if item is not None for line in str(item).splitlines() if line.strip()]


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS = frozenset(("msg",))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        lines = lines_of(self._task.args.get("msg"))
        for line in lines:
            display.display(line)
        # After a run's start, its console.log keeps them too.
        results_dir = (task_vars or {}).get("aorta_results_dir_resolved")
        _console.log_lines(str(self._templar.template(results_dir)) if results_dir else None, lines)
        result.update(changed=False, lines=lines)
        return result
