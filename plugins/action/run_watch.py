# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_watch (documented in plugins/modules/run_watch.py); its
loop is plugin_utils/watch/_watch.py's ``watch``, the same as each node's own wait."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _aggregator
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console, _interrupt, _watch

display = Display()


class ActionModule(Step):
    _VALID_ARGS = frozenset(
        (
            "status_path",
            "aggregate_path",
            "head",
            "timeout_seconds",
            "poll_seconds",
            "progress_dir",
            "total_nodes",
            "total_steps",
            "unreachable_polls",
        )
    )

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        poll = max(1, int(args.get("poll_seconds") or DEFAULTS["aorta_poll_seconds"]))
        command = _watch.long_poll_command(str(args["status_path"]), str(args["aggregate_path"]), poll)
        head = str(args.get("head") or (task_vars or {}).get("inventory_hostname", "head"))
        progress_dir = str(args["progress_dir"]) if args.get("progress_dir") else None
        total_nodes = int(args.get("total_nodes") or 1)
        total_steps = int(args["total_steps"]) if args.get("total_steps") else None
        # The progress lines go to the run's console.log too.
        results_dir = (task_vars or {}).get("aorta_results_dir_resolved")
        results_dir = str(self._templar.template(results_dir)) if results_dir else None
        say = _console.printer(results_dir, display.display)

        seen = _watch.watch(
            self.stopping_reader(
                _watch.reader(self._remote, command), self._remote, str(args["aggregate_path"]), say, result
            ),
            int(args["timeout_seconds"]),
            _watch.head_poll(progress_dir, head, total_nodes, total_steps, say),
            lost_polls=int(args.get("unreachable_polls") or 3),
            poll_s=poll,
        )
        result.update(changed=False, **seen)
        return result

    @staticmethod
    def stopping_reader(
        read: Callable[[], _watch.Reading],
        remote: Callable[[str], dict[str, Any]],
        aggregate_path: str,
        say: Callable[[str], None],
        result: dict[str, Any],
    ) -> Callable[[], _watch.Reading]:
        """``read``, that first tells the head once the user asked the run to stop on the controller
        (the first Ctrl-C or SIGTERM: plugin_utils/watch/_interrupt.py): one command writes the head's stop
        request, which its aggregator turns into every node's stop. When ansible-playbook is gone (a
        SIGKILL: an AWX cancel), this worker, which leads a process group of its own, ends too
        instead of polling the head on its own: the nodes keep the run (aorta_orphan_grace_seconds)."""
        parent = os.getppid()

        def stopping() -> _watch.Reading:
            if os.getppid() != parent:  # reparented: nobody will read this result
                os._exit(0)
            if "stop_requested" not in result:
                stop = _interrupt.claim("while training")
                if stop is not None:
                    path = _aggregator.stop_request_path(aggregate_path)
                    reason = str(stop.get("reason") or "stopped from the controller")
                    remote(_interrupt.head_command(path, reason))
                    result["stop_requested"] = stop
                    say(f"asked the head to stop every node: {reason}")
            return read()

        return stopping
