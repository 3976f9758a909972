# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_wait (documented in plugins/modules/run_wait.py); its
loop is plugin_utils/watch/_watch.py's ``node_wait``, the same as the head's watch."""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _watch
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch._progress import named_silent

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
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

    def _remote(self, command: str) -> dict[str, Any]:
        try:
            return self._low_level_execute_command(command, sudoable=False)
        except AnsibleConnectionFailure as exc:
            raise _watch.Unreachable(str(exc)) from None

    def wait(self, args: Any, task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """Poll the node's status file until its supervisor finishes (one read when it already has)."""
        poll = max(1, int(args.get("poll_seconds") or DEFAULTS["aorta_poll_seconds"]))
        progress_dir = str(args["progress_dir"]) if args.get("progress_dir") else None
        node = str((task_vars or {}).get("inventory_hostname", "node"))
        total_steps = int(args["total_steps"]) if args.get("total_steps") else None

        def gone() -> str | None:
            # The head already stopped the run for this node's silence: no need to ask again.
            return named_silent(progress_dir, node) if progress_dir else None

        seen = _watch.node_wait(
            _watch.reader(self._remote, _watch.long_poll_command(str(args["status_path"]), None, poll)),
            int(args["timeout_seconds"]),
            _watch.node_poll(progress_dir, node, int(args.get("total_nodes") or 1), total_steps, poll, display.display),
            lost_polls=int(args.get("unreachable_polls") or 3),
            poll_s=poll,
            gone=gone,
        )
        if seen["finished"]:
            if args.get("results_file"):
                with contextlib.suppress(AnsibleConnectionFailure):
                    self._low_level_execute_command(
                        "rm -f -- " + shlex.quote(str(args["results_file"])), sudoable=False
                    )
            seen["changed"] = False
        return seen
