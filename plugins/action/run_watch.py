# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_watch (documented in plugins/modules/run_watch.py)."""

from __future__ import annotations

import contextlib
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils import _watch
from ansible_collections.aorta.cluster.plugins.plugin_utils._progress import progress_line, save_snapshot

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
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
        poll = max(1, int(args.get("poll_seconds") or 15))
        command = _watch.long_poll_command(str(args["status_path"]), str(args["aggregate_path"]), poll)
        head = str(args.get("head") or (task_vars or {}).get("inventory_hostname", "head"))
        progress_dir = args.get("progress_dir")
        total_nodes = int(args.get("total_nodes") or 1)
        total_steps = int(args["total_steps"]) if args.get("total_steps") else None

        def read():
            try:
                res = self._low_level_execute_command(command, sudoable=False)
            except AnsibleConnectionFailure as exc:
                raise _watch.Unreachable(str(exc)) from None
            return _watch.parse(res.get("stdout") or "") if res.get("rc") == 0 else (None, None)

        def on_poll(aggregate, status):
            if status is not None and progress_dir:
                with contextlib.suppress(OSError):
                    if status.get("finished") and aggregate is not None:
                        # At the end, every node as the head last heard it: the line the nodes'
                        # own waits print next counts them all, until each node's record replaces it.
                        for name, snap in _watch.snapshots(aggregate, status).items():
                            save_snapshot(str(progress_dir), name, snap)
                    # The head's record, silent_nodes included, where every node's own wait looks.
                    save_snapshot(str(progress_dir), head, status)
            if aggregate is not None:
                display.display(progress_line(_watch.snapshots(aggregate, status), total_nodes, total_steps))

        seen = _watch.watch(
            read,
            int(args["timeout_seconds"]),
            on_poll,
            lost_polls=int(args.get("unreachable_polls") or 3),
            poll_s=poll,
        )
        result.update(changed=False, **seen)
        return result
