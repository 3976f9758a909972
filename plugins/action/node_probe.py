# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run node_probe on the node, then judge its facts here, in the controller's own Python."""

from __future__ import annotations

from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._node_work import NodeProbe


class ActionModule(NodeProbe):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result.update(self.probe(dict(self._task.args), task_vars))
        return result
