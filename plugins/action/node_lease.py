# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the node_lease module with the controller's identity as the lease owner."""

from __future__ import annotations

from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import controller_identity
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step


class ActionModule(Step):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if not args.get("owner"):
            args["owner"] = controller_identity()
        result.update(
            self._execute_module(module_name="aorta.cluster.node_lease", module_args=args, task_vars=task_vars)
        )
        return result
