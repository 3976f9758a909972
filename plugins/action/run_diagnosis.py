# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_diagnosis (documented in plugins/modules/run_diagnosis.py)."""

from __future__ import annotations

from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _record
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step


class ActionModule(Step):
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec={
                "results_dir": {"type": "path", "required": True},
                "status": {"type": "str", "required": True, "choices": ["COMPLETED", "FAILED", "TIMEOUT"]},
                "nodes": {"type": "list", "elements": "dict", "required": True},
                "nproc_per_node": {"type": "int", "required": True},
            }
        )[1]
        # The same fallback as run_record's: a bug in the diagnosis must not cost the run its run.json.
        diagnosis = _record.diagnosis(args["results_dir"], args["status"], args["nodes"], args["nproc_per_node"])
        result.update(changed=False, diagnosis=diagnosis, msg=diagnosis["summary"])
        return result
