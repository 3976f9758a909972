# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one progress line printed per poll while a run is in flight (controller side).

Private to this collection. Snapshots are the supervisors' status records, one per node, kept in
a controller directory by the waiting tasks (one file per node, replaced atomically), so the line
covers every node however many forks there are.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import silent_reasons

ACTIVE = ("running", "diagnosing", "terminating", "killing", "cleaning")


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}:" if hours else "") + "{:02d}:{:02d}".format(*divmod(rest, 60))


def progress_line(snapshots: Mapping[str, Mapping[str, Any]], total_nodes: int, total_steps: int | None = None) -> str:
    """``running 62/64 nodes · step 17/200 · slowest rank 5 (node x) at 12 · 03:12 left``.

    ``snapshots``: node name -> its latest status record (nodes not heard from yet are missing).
    The step is the furthest rank's; the slowest rank is named only when ranks disagree.
    """
    states = [str(s.get("state")) for s in snapshots.values()]
    running = sum(state in ACTIVE for state in states)
    parts = [f"running {running}/{total_nodes} nodes"]
    finished = [s for s in snapshots.values() if s.get("state") == "finished"]
    if finished:
        bad = sum(s.get("outcome") != "ok" for s in finished)
        parts.append(f"{len(finished)} finished" + (f" ({bad} not ok)" if bad else ""))
    silent = sum(state == "silent" for state in states)  # the head counts them as gone
    if silent:
        parts.append(f"{silent} silent")
    if len(snapshots) < total_nodes:
        parts.append(f"{total_nodes - len(snapshots)} starting")
    steps: dict[tuple[str, int], int] = {}
    for node, snap in snapshots.items():
        for rank, count in (snap.get("progress") or {}).items():
            steps[(node, int(rank))] = int(count)
    if steps:
        furthest = max(steps.values())
        parts.append(f"step {furthest}" + (f"/{total_steps}" if total_steps else ""))
        (node, rank), least = min(steps.items(), key=lambda item: (item[1], item[0][1]))
        if least < furthest:
            parts.append(f"slowest rank {rank} ({node}) at {least}")
    left = [float(s["left_s"]) for s in snapshots.values() if s.get("state") in ACTIVE and "left_s" in s]
    if left:
        parts.append(f"{_clock(min(left))} left")
    return " · ".join(parts)


def save_snapshot(directory: str, node: str, snapshot: Mapping[str, Any]) -> None:
    """Keep ``node``'s latest status where every waiting task can read it."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{node}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        json.dump({k: v for k, v in snapshot.items() if k != "log_tail"}, handle)
    os.replace(tmp, path)


def load_all_snapshots(directory: str) -> dict[str, dict[str, Any]]:
    """Every node's latest status kept in ``directory``, by node name."""
    found = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                found[name[: -len(".json")]] = json.load(handle)
        except (OSError, ValueError):
            continue
    return found


def due_line(
    directory: str,
    total_nodes: int,
    total_steps: int | None,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """The run's line from every node's kept snapshot, once per poll interval for the whole run:
    the nodes' waits run in parallel (forks), and whichever gets here first in an interval prints it
    (a lock and a stamp file in ``directory``); None for the others."""
    stamp = os.path.join(directory, ".printed")
    with open(os.path.join(directory, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as handle:
                last = float(handle.read() or 0)
        except (OSError, ValueError):
            last = 0.0
        now = clock()
        if now - last < poll_s - 0.5:
            return None
        with open(stamp, "w") as handle:
            handle.write(repr(now))
        return progress_line(load_all_snapshots(directory), total_nodes, total_steps)


def named_silent(directory: str, node: str) -> str | None:
    """Why the other nodes' supervisors were told that ``node`` went silent, from their kept status
    records (``_run.silent_reasons``); else None. A node the controller cannot reach either is gone:
    its wait need not ask again."""
    try:
        snapshots = load_all_snapshots(directory)
    except OSError:
        return None
    return silent_reasons(snap for name, snap in snapshots.items() if name != node).get(node)
