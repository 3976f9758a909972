# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.cvs_vars (documented in plugins/modules/cvs_vars.py): read,
map and write in the controller's own Python, one task instead of a set_fact, a tempfile and a copy."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import yaml
from ansible.errors import AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._cvs_config import cvs_config
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step

display = Display()


def write_vars(variables: dict[str, Any]) -> str:
    """The variables as YAML in a new 0600 scratch file; its path."""
    fd, path = tempfile.mkstemp(suffix=".aorta-cvs.yml")
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(variables, handle, default_flow_style=False, sort_keys=True)
    return path


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS = frozenset(("src",))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        src = str(self._task.args.get("src") or "")
        try:
            found = self._find_needle("files", src) if src else ""
        except AnsibleError:
            found = ""
        if not found:
            result.update(failed=True, msg=f"aorta_cvs_config: {src or '(empty)'}: no such file")
            return result
        try:
            with open(found, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
            mapped = cvs_config(data, src)
        except (OSError, yaml.YAMLError, LaunchError) as err:
            result.update(failed=True, msg=str(err).splitlines()[0] if str(err) else f"{src}: unreadable")
            return result
        for line in mapped["not_used"]:
            display.display(f"{src}: not used: {line}")
        result.update(
            changed=False,
            path=write_vars(mapped["vars"]),
            names=sorted(mapped["vars"]),
            not_used=mapped["not_used"],
        )
        return result
