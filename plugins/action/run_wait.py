# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_wait (documented in plugins/modules/run_wait.py); its
wait is plugin_utils/steps/_node_work.py's ``NodeWait``, the same loop as the head's watch."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._node_work import NodeWait

display = Display()


class ActionModule(NodeWait):
    _VALID_ARGS = frozenset(
        (
            "status_path",
            "timeout_seconds",
            "poll_seconds",
            "progress_dir",
            "total_nodes",
            "total_steps",
            "results_file",
            "unreachable_polls",
        )
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result.update(self.wait(self._task.args, task_vars))
        return result
