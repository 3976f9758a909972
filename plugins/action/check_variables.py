# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.check_variables (documented in plugins/modules/check_variables.py)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.aorta.cluster.plugins.plugin_utils._variables import RULES, check


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        values = {}
        for name in RULES:
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError:
                continue  # refers to what is not known yet; the roles' own checks see it later
        errors = check(values)
        result.update(changed=False, checked=sorted(values), errors=errors)
        if errors:
            result.update(failed=True, msg="; ".join(errors))
        return result
