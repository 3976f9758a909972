# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's one wait for the whole run: the head's aggregate, read once per poll
(controller side; the loop is tested in-process with scripted reads).

Private to this collection. The head's supervisor keeps ``aggregates/<run>.json`` (every node's last
report, the stop, the silent nodes) and finishes only once every node has ended or gone silent, so
the head's own status saying ``finished`` is the run's end. One remote command per poll, whatever
the node count; when the head cannot be read the wait says so and the nodes are read one by one
(``run_wait``), as before the head watched the run.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Callable, Mapping
from typing import Any

MARK = "--aorta-status--"
NEVER_STARTED_S = 120  # the head's status not there this long after the launch: it never started


class Unreachable(Exception):
    """The head could not be reached for one read."""


def long_poll_command(status_path: str, aggregate_path: str, seconds: int) -> str:
    """One remote command: wait up to ``seconds`` for the head to finish, then print the aggregate,
    a marker line and the head's own status."""
    status, aggregate = shlex.quote(status_path), shlex.quote(aggregate_path)
    return (
        f"i=0; while [ $i -lt {int(seconds)} ] && ! grep -qs '\"finished\": true' {status}; "
        "do sleep 1; i=$((i+1)); done; "
        f"cat -- {aggregate} 2>/dev/null; echo; echo {MARK}; cat -- {status}"
    )


def parse(stdout: str) -> tuple[dict | None, dict | None]:
    """(aggregate, head status) from the command's output; None for what was not there or was half
    written (both files are replaced atomically: a partial read is a dying node's)."""
    before, _mark, after = (stdout or "").partition(MARK)
    found = []
    for text in (before, after):
        value = None
        with contextlib.suppress(ValueError):
            value = json.loads(text) if text.strip() else None
        found.append(value if isinstance(value, dict) else None)
    return found[0], found[1]


def snapshots(aggregate: Mapping[str, Any], head_status: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every node's state as the progress line reads it, from the aggregate: a finished node is
    ``finished``, a node the head counts as gone ``silent``, one still joining is left out (it is
    starting); time left is the head's."""
    silent = aggregate.get("silent") or {}
    left = (head_status or {}).get("left_s")
    found = {}
    for name, node in (aggregate.get("nodes") or {}).items():
        if not node.get("seen") or node.get("state") == "joining":
            continue  # still starting: not launched yet
        state = "finished" if node.get("finished") else "silent" if name in silent else node.get("state")
        snap = {"state": state, "outcome": node.get("outcome"), "progress": node.get("progress") or {}}
        if left is not None:
            snap["left_s"] = left
        found[name] = snap
    return found


def watch(
    read: Callable[[], tuple[dict | None, dict | None]],
    timeout_s: float,
    on_poll: Callable[[dict | None, dict | None], None] = lambda aggregate, status: None,
    lost_polls: int = 3,
    poll_s: float = 15,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Read until the head says it has finished. ``read()`` returns (aggregate, head status) or
    raises Unreachable. The answer: ``finished``, ``aggregate``, ``status``, ``polls``, and when the
    end was not seen ``head_lost`` (unreachable ``lost_polls`` reads in a row) or ``lost`` (why)."""
    started = clock()
    aggregate = status = None
    polls = misses = 0
    while True:
        polls += 1
        try:
            got_aggregate, got_status = read()
            misses = 0
        except Unreachable as exc:
            misses += 1
            if misses >= lost_polls:
                return {
                    "finished": False,
                    "head_lost": True,
                    "lost": f"the head could not be reached: {exc}",
                    "aggregate": aggregate,
                    "status": status,
                    "polls": polls,
                }
            sleep(poll_s)
            continue
        aggregate = got_aggregate or aggregate
        status = got_status or status
        on_poll(aggregate, status)
        if status is not None and status.get("finished"):
            return {"finished": True, "aggregate": aggregate, "status": status, "polls": polls}
        now = clock()
        if status is None and now - started > NEVER_STARTED_S:
            lost = "the head's supervisor never wrote its status"
            return {"finished": False, "lost": lost, "aggregate": aggregate, "status": None, "polls": polls}
        if now - started > timeout_s:
            lost = "the head's supervisor did not finish in time"
            return {"finished": False, "lost": lost, "aggregate": aggregate, "status": status, "polls": polls}
