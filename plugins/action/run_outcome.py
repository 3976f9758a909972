# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.run_outcome (documented in plugins/modules/run_outcome.py).

The run's last task, whatever happened before it: the verdict goes into run.json, junit.xml and the
history are written, the verdict is the console's last line, and the play fails (after
everything is written) when the run did not pass: the next task, with the verdict's line.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import kinds_of
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _outcome
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console

display = Display()


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        results_dir = str(self._variable(task_vars, "aorta_results_dir_resolved", "") or "")
        if not results_dir:
            result.update(failed=True, msg="aorta_results_dir_resolved: not set; run_outcome runs after run_record")
            return result
        ignore = self._variable(task_vars, "aorta_baseline_ignore", DEFAULTS["aorta_baseline_ignore"]) or []
        fail_on_threshold = boolean(
            self._variable(task_vars, "aorta_fail_on_threshold", DEFAULTS["aorta_fail_on_threshold"]), strict=False
        )
        check_mode = bool(self._task.check_mode)
        try:
            ignores = kinds_of(self._variable(task_vars, "aorta_verdict_ignores", DEFAULTS["aorta_verdict_ignores"]))
            found = _outcome.finish(
                results_dir, ignore=[str(key) for key in ignore], write=not check_mode, verdict_ignores=ignores
            )
        except (_outcome.OutcomeError, ValueError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        _console.printer(results_dir, display.display)(found["line"])
        if found.get("history_error"):
            result.setdefault("warnings", []).append(found["history_error"])
        fails = _outcome.fails_play(found, fail_on_threshold)
        # Not "changed": the callback would print a line after the verdict, which must end the output.
        result.update(changed=False, fails_play=fails, ansible_stats=_outcome.awx_stats(found), **found)
        return result
