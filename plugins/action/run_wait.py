# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller side of aorta.cluster.run_wait (documented in plugins/modules/run_wait.py)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import time
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils._progress import (
    load_all_snapshots,
    named_silent,
    progress_line,
    save_snapshot,
)

display = Display()

# A status file not there this long after the launch: the supervisor never started.
NEVER_STARTED_S = 120


def long_poll_command(path: str, seconds: int) -> str:
    """One remote command: wait up to ``seconds`` for the run to finish, then print the status."""
    quoted = shlex.quote(path)
    return (
        f"i=0; while [ $i -lt {int(seconds)} ] && ! grep -qs '\"finished\": true' {quoted}; "
        "do sleep 1; i=$((i+1)); done; "
        f"cat -- {quoted}"
    )


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

    def wait(self, args: Any, task_vars: dict[str, Any] | None) -> dict[str, Any]:
        """Poll the node's status file until its supervisor finishes (one read when it already has)."""
        result: dict[str, Any] = {}
        path = str(args["status_path"])
        poll = max(1, int(args.get("poll_seconds") or 15))
        started = time.monotonic()
        give_up = started + int(args["timeout_seconds"])
        progress_dir = args.get("progress_dir")
        node = str((task_vars or {}).get("inventory_hostname", "node"))
        misses = polls = 0
        status: dict[str, Any] | None = None
        while True:
            polls += 1
            try:
                res = self._low_level_execute_command(long_poll_command(path, poll), sudoable=False)
                misses = 0
            except AnsibleConnectionFailure as exc:
                misses += 1
                # The head already stopped the run for this node's silence: no need to ask again.
                silent = named_silent(str(progress_dir), node) if progress_dir else None
                if silent or misses >= int(args.get("unreachable_polls") or 3):
                    # Data, not Ansible's "unreachable": under any_errors_fatal an unreachable
                    # host (even ignored) would stop every node's wait and lose their outcomes.
                    msg = f"{exc} (the others were told: {silent})" if silent else str(exc)
                    result.update(node_unreachable=True, finished=False, polls=polls, status=status, msg=msg)
                    return result
                time.sleep(poll)
                continue
            if res.get("rc") == 0:
                # Replaced atomically: a partial read is a dying node's; the next poll tells.
                with contextlib.suppress(ValueError):
                    status = json.loads(res.get("stdout") or "")
            if status is not None and progress_dir:
                save_snapshot(progress_dir, node, status)
                self._print_summary(progress_dir, int(args.get("total_nodes") or 1), args.get("total_steps"), poll)
            if status is not None and status.get("finished"):
                break
            now = time.monotonic()
            if status is None and now - started > NEVER_STARTED_S:
                result.update(finished=False, lost="the supervisor never wrote its status", polls=polls, status=None)
                return result
            if now > give_up:
                result.update(finished=False, lost="the supervisor did not finish in time", polls=polls, status=status)
                return result
        if args.get("results_file"):
            with contextlib.suppress(AnsibleConnectionFailure):
                self._low_level_execute_command("rm -f -- " + shlex.quote(str(args["results_file"])), sudoable=False)
        result.update(changed=False, finished=True, polls=polls, status=status)
        return result

    @staticmethod
    def _print_summary(directory: str, total_nodes: int, total_steps: Any, poll: int) -> None:
        """One line per poll interval for the whole run, printed by whichever waiter gets there first."""
        stamp = os.path.join(directory, ".printed")
        with open(os.path.join(directory, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(stamp) as handle:
                    last = float(handle.read() or 0)
            except (OSError, ValueError):
                last = 0.0
            now = time.monotonic()
            if now - last < poll - 0.5:
                return
            with open(stamp, "w") as handle:
                handle.write(repr(now))
            line = progress_line(load_all_snapshots(directory), total_nodes, int(total_steps) if total_steps else None)
        display.display(line)
