# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.run_history (documented in plugins/modules/run_history.py):
index.json and index.html of a results root rebuilt from every run.json one level under it."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS = frozenset(("root", "ignore"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        root = os.path.abspath(os.path.expanduser(str(self._task.args.get("root") or "")))
        ignore = [str(key) for key in self._task.args.get("ignore") or []]
        if not self._task.args.get("root") or not os.path.isdir(root):
            result.update(failed=True, msg=f"root: {root or '(empty)'} is not a directory of runs")
            return result
        if self._task.check_mode:
            result.update(changed=False, root=root)
            return result
        try:
            found = _history.rebuild(root, ignore)
        except OSError as exc:
            result.update(failed=True, msg=f"{exc.filename or root}: cannot write the history: {exc.strerror}")
            return result
        result.update(changed=True, root=root, **found)
        campaigns = f" and {found['campaigns']} scaling campaigns" if found.get("campaigns") else ""
        result["msg"] = f"history of {found['runs']} runs{campaigns}: {found['index_html']}"
        return result
