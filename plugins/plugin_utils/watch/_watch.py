# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's one wait loop for a run's end, and the two waits built on it (controller side;
tested in-process with scripted reads and a fake clock).

Private to this collection. ``wait`` reads a supervisor's status, one remote command per poll (a long
poll that returns as soon as the status says ``finished``), until it is done, was never written,
ran out of time, or the node could not be reached. Two callers:

- ``watch`` (run_watch, once per run): the head's status and the aggregate its supervisor keeps
  (``aggregates/<run>.json``: every node's last report, the stop, the silent nodes). The head finishes
  only once every node has ended or gone silent, so this one read per poll, whatever the node count,
  sees the whole run and prints its progress line.
- ``node_wait`` (run_wait, which every node's node_end calls after the watch): that node's own status.
  Where the watch saw the run end, each node's status already says ``finished`` and this is one read;
  where the head was lost or the watch gave up, each node is read until its own supervisor ends (the
  node keeps its deadline), and those reads print the progress line instead.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._aggregator import watched_path
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import NEVER_STARTED_S
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch._progress import (
    due_line,
    progress_line,
    save_snapshot,
)

MARK = "--aorta-status--"

Reading = tuple[Optional[dict], Optional[dict]]  # (aggregate, status), None for what was not read


class Unreachable(Exception):
    """The node could not be reached for one read."""


def long_poll_command(status_path: str, aggregate_path: str | None, seconds: int) -> str:
    """One remote command: wait up to ``seconds`` for the supervisor to finish, then print the
    aggregate (when a path is given: the head's), a marker line and the supervisor's status. It fails
    when the status is not there. On the head it first leaves the mark that a controller watches the
    run (aorta_orphan_grace_seconds counts from the last one): no command of its own."""
    status = shlex.quote(status_path)
    aggregate = f"cat -- {shlex.quote(aggregate_path)} 2>/dev/null; " if aggregate_path else ""
    mark = f"touch -- {shlex.quote(watched_path(aggregate_path))} 2>/dev/null; " if aggregate_path else ""
    return (
        f"{mark}i=0; while [ $i -lt {int(seconds)} ] && ! grep -qs '\"finished\": true' {status}; "
        "do sleep 1; i=$((i+1)); done; "
        f"{aggregate}echo; echo {MARK}; cat -- {status}"
    )


def parse(stdout: str) -> Reading:
    """(aggregate, status) from the command's output; None for what was not there or was half
    written (both files are replaced atomically: a partial read is a dying node's)."""
    before, _mark, after = (stdout or "").partition(MARK)
    found = []
    for text in (before, after):
        value = None
        with contextlib.suppress(ValueError):
            value = json.loads(text) if text.strip() else None
        found.append(value if isinstance(value, dict) else None)
    return found[0], found[1]


def reader(execute: Callable[[str], Mapping[str, Any]], command: str) -> Callable[[], Reading]:
    """``read()`` for ``wait``: ``execute(command)`` (Ansible's result: ``rc``, ``stdout``; raises
    Unreachable) parsed; a failed command (the status not written yet) reads nothing."""

    def read() -> Reading:
        res = execute(command)
        return parse(str(res.get("stdout") or "")) if res.get("rc") == 0 else (None, None)

    return read


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


def finished(status: Mapping[str, Any]) -> bool:
    return bool(status.get("finished"))


def wait(
    read: Callable[[], Reading],
    timeout_s: float,
    on_poll: Callable[[dict | None, dict | None], None] = lambda aggregate, status: None,
    lost_polls: int = 3,
    poll_s: float = 15,
    who: str = "the supervisor",
    gone: Callable[[], str | None] = lambda: None,
    done: Callable[[Mapping[str, Any]], bool] = finished,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Read until ``done(status)``. ``read()`` returns (aggregate, status) or raises Unreachable; a
    read that brings nothing keeps what the last one brought. ``on_poll(aggregate, status)`` after
    every read that reached the node. ``gone()``, asked when a read does not reach it: why it is
    already known to be gone (no need to ask again), or None.

    The answer: ``finished``, ``aggregate``, ``status``, ``polls``; when the end was not seen, ``lost``
    (``who`` never wrote its status within NEVER_STARTED_S, or did not finish within ``timeout_s``)
    or ``unreached`` (the last error, unreachable ``lost_polls`` reads in a row) with ``gone``."""
    started = clock()
    aggregate = status = None
    polls = misses = 0
    while True:
        polls += 1
        try:
            got_aggregate, got_status = read()
        except Unreachable as exc:
            misses += 1
            why = gone()
            if why or misses >= lost_polls:
                return {
                    "finished": False,
                    "unreached": str(exc),
                    "gone": why,
                    "aggregate": aggregate,
                    "status": status,
                    "polls": polls,
                }
            sleep(poll_s)
            continue
        misses = 0
        aggregate, status = got_aggregate or aggregate, got_status or status
        on_poll(aggregate, status)
        seen = {"aggregate": aggregate, "status": status, "polls": polls}
        if status is not None and done(status):
            return {"finished": True, **seen}
        elapsed = clock() - started
        if status is None and elapsed > NEVER_STARTED_S:
            return {"finished": False, "lost": f"{who} never wrote its status", **seen}
        if elapsed > timeout_s:
            return {"finished": False, "lost": f"{who} did not finish in time", **seen}


def watch(
    read: Callable[[], Reading],
    timeout_s: float,
    on_poll: Callable[[dict | None, dict | None], None] = lambda aggregate, status: None,
    lost_polls: int = 3,
    poll_s: float = 15,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The head's watch (run_watch): ``wait`` on the head's status and aggregate. When the end was not
    seen: ``lost`` (why), with ``head_lost`` when the head could not be reached."""
    seen = wait(read, timeout_s, on_poll, lost_polls, poll_s, "the head's supervisor", clock=clock, sleep=sleep)
    if "unreached" in seen:
        error = seen.pop("unreached")
        seen.pop("gone")
        seen.update(head_lost=True, lost=f"the head could not be reached: {error}")
    return seen


def node_wait(
    read: Callable[[], Reading],
    timeout_s: float,
    on_poll: Callable[[dict | None, dict | None], None] = lambda aggregate, status: None,
    lost_polls: int = 3,
    poll_s: float = 15,
    gone: Callable[[], str | None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """One node's own wait (run_wait, node_end): ``wait`` on its supervisor's status. A node that
    could not be reached is ``node_unreachable`` with ``msg``: data, not Ansible's "unreachable", since
    under any_errors_fatal an unreachable host (even ignored) would stop every node's wait."""
    seen = wait(read, timeout_s, on_poll, lost_polls, poll_s, "the supervisor", gone, clock=clock, sleep=sleep)
    seen.pop("aggregate", None)
    if "unreached" in seen:
        error, why = seen.pop("unreached"), seen.pop("gone")
        seen.update(node_unreachable=True, msg=f"{error} (the others were told: {why})" if why else error)
    return seen


def head_poll(
    progress_dir: str | None, head: str, total_nodes: int, total_steps: int | None, say: Callable[[str], None]
) -> Callable[[dict | None, dict | None], None]:
    """``on_poll`` for the head's watch: the progress line for every node from the aggregate, and the
    head's record kept in ``progress_dir`` (its ``silent_nodes`` included), where every node's own
    wait looks for whether the head counted it as gone."""

    def on_poll(aggregate: dict | None, status: dict | None) -> None:
        if status is not None and progress_dir:
            with contextlib.suppress(OSError):
                if status.get("finished") and aggregate is not None:
                    # At the end, every node as the head last heard it: the line the nodes' own
                    # waits print next counts them all, until each node's record replaces it.
                    for name, snap in snapshots(aggregate, status).items():
                        save_snapshot(progress_dir, name, snap)
                save_snapshot(progress_dir, head, status)
        if aggregate is not None:
            say(progress_line(snapshots(aggregate, status), total_nodes, total_steps))

    return on_poll


def node_poll(
    progress_dir: str | None,
    node: str,
    total_nodes: int,
    total_steps: int | None,
    poll_s: float,
    say: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[dict | None, dict | None], None]:
    """``on_poll`` for one node's own wait: its status kept as its snapshot in ``progress_dir``, and
    the run's line printed once per poll interval by whichever node's wait gets there first."""

    def on_poll(_aggregate: dict | None, status: dict | None) -> None:
        if status is None or not progress_dir:
            return
        save_snapshot(progress_dir, node, status)
        line = due_line(progress_dir, total_nodes, total_steps, poll_s, clock)
        if line is not None:
            say(line)

    return on_poll
