# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bookkeeping: per-node outcome, the run's status, the fabric interface (controller side).

Private to this collection.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names

STATES = ("ok", "failed", "timeout", "unreachable", "not_started", "excluded")
# Below this much free space the output directory's file system counts as full: a profiler that
# meets it loses its trace and may still exit 0 (Kineto logs "Failed to write to log file!").
DISK_FULL_BYTES = 1 << 20
_ENOSPC = "No space left on device"
# A console line about a failure, at most (the verdict line's bound too): run.json keeps the whole text.
MESSAGE_MAX = 300
DETAILS = "\u2026(details in run.json)"


def first_failure(failures: Sequence[Any]) -> str:
    """A node's failed checks in a line: the first whole, and how many more there are (every one is in
    run.json's ``unhealthy`` and unhealthy.txt)."""
    more = f" (+{len(failures) - 1} more in run.json)" if len(failures) > 1 else ""
    return f"{failures[0]}{more}" if failures else ""


def clip(text: Any, limit: int = MESSAGE_MAX, details: str = DETAILS) -> str:
    """``text`` as one line of at most ``limit`` characters: cut, saying ``details``, when longer."""
    line = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    if len(line) <= limit:
        return line
    return line[: max(limit - len(details), 0)].rstrip() + details


def disk_full(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The output directory's file system ran full during the run (from the supervisor's ``disk``
    and the log's ENOSPC), else None."""
    disk = status.get("disk") or {}
    lowest = disk.get("lowest_free_bytes")
    said = _ENOSPC in (status.get("log_tail") or "")
    if not said and (lowest is None or lowest >= DISK_FULL_BYTES):
        return None
    return {"path": disk.get("path"), "free_bytes": lowest, "total_bytes": disk.get("total_bytes"), "enospc": said}


def _size(value: Any) -> str:
    if value is None:
        return "?"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def disk_text(full: Mapping[str, Any]) -> str:
    text = f"disk full: {full.get('path')} had {_size(full.get('free_bytes'))} free of {_size(full.get('total_bytes'))}"
    return text + (" (ENOSPC in the log)" if full.get("enospc") else "")


def node_state(wait: Mapping[str, Any] | None) -> dict[str, Any]:
    """One node's outcome from what ``aorta.cluster.run_wait`` saw of its supervisor.

    ``wait`` is that task's result (None or skipped when nothing was launched on the node).
    """
    if not wait or wait.get("skipped"):
        return {"state": "not_started", "exit_code": None}
    if wait.get("unreachable") or wait.get("node_unreachable"):
        return {"state": "unreachable", "exit_code": None}
    status = wait.get("status") or {}
    if not wait.get("finished"):
        # Never started: the launch failed on the node. Not seen to finish: treat as a timeout.
        if not status:
            return {"state": "failed", "exit_code": -1}
        return {"state": "timeout", "exit_code": -1}
    outcome = status.get("outcome")
    full = disk_full(status)
    extra = {"disk_full": full} if full else {}
    if outcome == "timeout":
        return {"state": "timeout", "exit_code": -1, **extra}
    rc = status.get("rc")
    if outcome == "ok" and rc == 0 and not full:
        return {"state": "ok", "exit_code": 0}
    # A full disk fails the node even when its ranks exited 0: their traces are not all there.
    return {"state": "failed", "exit_code": -1 if rc is None else int(rc), **extra}


def node_setup_failure(node: str, task: Any, result: Any) -> tuple[str, bool]:
    """(what stopped ``node``'s setup, whether it was its own task) from its rescue's failed task name
    and result: '' when the node only stopped because another failed (any_errors_fatal); the result's
    first failure whole where it lists them (``failures``: preflight's checks), else its msg; the tail
    of a failed command's stderr (3 lines) after its exit code. A worker not held because the head
    failed says so (its result's ``own`` is false)."""
    result = result if isinstance(result, Mapping) else {}
    if not task:
        return "", False
    own = boolean(result.get("own", True), strict=False)
    if not result.get("failed"):
        return "", own
    # The checks' own lines where the step gave them (its msg may be cut for the console).
    failures = result.get("failures")
    said = first_failure(failures) if isinstance(failures, Sequence) and not isinstance(failures, str) else ""
    message = f"{node}: {task}: {said or result.get('msg', 'failed')}"
    stderr = [str(line) for line in result.get("stderr_lines") or ()]
    if stderr:
        message += f" (rc {result.get('rc')}): " + " | ".join(stderr[-3:])
    return message, own


def without_node(node: str, message: str) -> str:
    """``message`` without ``node``'s name where it only says whose it is (``<node>: ``), to compare
    the nodes' reasons; the name anywhere else keeps the reason the node's own."""
    return re.sub(rf"(?<![\w.-]){re.escape(node)}: ", "", message)


def setup_failure(names: Sequence[str], messages: Sequence[Any], own: Sequence[Any]) -> dict[str, Any]:
    """Why setup stopped before the launch, and every node where it did, from each node's rescue.

    ``messages[i]`` is what stopped ``names[i]`` ('' when it was stopped only because another node
    failed: any_errors_fatal), ``own[i]`` whether that was the node's own task. A run_once task's
    failure (the check that names the unreachable nodes) is reported by whichever node ran it:
    that node is named only when no node failed a task of its own. Nodes in rank order. When every
    node (of two or more) failed its own task for the same reason (an image no node has), the
    reason is said once: ``every node: <reason>``."""
    failed = [(str(n), str(m)) for n, m, o in zip(names, messages, own) if m and o]
    if not failed:
        failed = [(str(n), str(m)) for n, m in zip(names, messages) if m]
    if not failed:
        return {"message": "setup stopped on a node that is gone", "failed_nodes": [], "first_failure": None}
    nodes = [name for name, _message in failed]
    reasons = {without_node(name, message) for name, message in failed}
    if len(names) > 1 and len(failed) == len(names) and all(own) and len(reasons) == 1:
        return {"message": f"every node: {reasons.pop()}", "failed_nodes": nodes, "first_failure": nodes[0]}
    message = failed[0][1]
    if len(nodes) > 1:
        message += f" (setup failed on {len(nodes)} nodes: {first_names(nodes, 10)})"
    return {"message": message, "failed_nodes": nodes, "first_failure": nodes[0]}


def run_status(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """COMPLETED when every node is ok; TIMEOUT when any timed out; else FAILED.

    Names every node that was not ok, and first the one where the trouble most likely started:
    a node whose fabric path broke (``fabric_suspects``: in a cut every rank waits at the same
    collective, so nothing else can tell) or whose output disk filled (``disk_full``), then for a
    failure, a node whose ranks failed on their own before one whose ranks lost a peer, then the
    earliest torchrun root cause; for a timeout, the node holding the rank that got least far
    (``progress``: steps per global rank at the deadline), since in synchronous training every
    other rank waits for it.
    """
    # Nodes preflight left out (aorta_exclude_unhealthy) did not run: they neither fail the run nor
    # count in it; the message says how many there were.
    excluded = [str(n.get("name")) for n in nodes if n.get("state") == "excluded"]
    nodes = [n for n in nodes if n.get("state") != "excluded"]
    left_out = f"; {len(excluded)} excluded by preflight: {first_names(excluded, 10)}" if excluded else ""
    if not nodes:
        return {"status": "FAILED", "failed_nodes": [], "first_failure": None, "message": "no nodes ran" + left_out}
    bad = [n for n in nodes if n.get("state") != "ok"]
    if not bad:
        return {
            "status": "COMPLETED",
            "failed_nodes": [],
            "first_failure": None,
            "message": f"all {len(nodes)} nodes completed" + left_out,
        }
    status = "TIMEOUT" if any(n.get("state") == "timeout" for n in bad) else "FAILED"
    laggards = _laggard_nodes(bad)
    # What the nodes themselves saw go wrong comes first: a fabric path that broke, a disk that filled
    # (a disk row comes after a fabric row of the same node, and is the one said).
    trouble = {row["node"]: row["text"] for row in node_trouble(nodes)}
    order = {"unreachable": 0, "timeout": 1, "not_started": 2, "failed": 3}

    def origin_key(node):
        failure = node.get("failure") or {}
        return (
            str(node.get("name")) not in trouble,
            node.get("name") not in laggards,
            order.get(str(node.get("state")), 4),
            bool(failure.get("secondary")),
            failure.get("root_cause_time") or "~",
            node.get("rank", 0),
        )

    bad = sorted(bad, key=origin_key)
    names = [str(n.get("name")) for n in bad]
    detail = ", ".join(_describe(n, n.get("name") in laggards, trouble.get(str(n.get("name")), "")) for n in bad)
    return {
        "status": status,
        "failed_nodes": names,
        "first_failure": names[0],
        "message": f"{status} on {len(bad)} of {len(nodes)} nodes, first {names[0]}: {detail}{left_out}",
    }


def _fabric_checked(nodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [n for n in nodes if isinstance(n.get("fabric"), Mapping) and n["fabric"].get("ok") is not None]


def _links_down(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes whose own fabric link is down or lost its carrier, by their supervisors' checks."""
    return [str(n.get("name")) for n in _fabric_checked(nodes) if n["fabric"].get("link_up") is False]


def fabric_suspects(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes whose fabric path broke, from the supervisors' checks (``fabric`` per node).

    A node whose own link is down or lost its carrier is named. Else a node that could not reach the
    head is named, unless every worker that checked (two or more) could not: then the head's side
    is the common cause and the head is named.
    """
    checked = _fabric_checked(nodes)
    down = _links_down(nodes)
    if down:
        return down
    asked = [n for n in checked if n["fabric"].get("head_reached") is not None]
    cut = [n for n in asked if n["fabric"]["head_reached"] is False]
    if not cut:
        return []
    if len(asked) >= 2 and len(cut) == len(asked):
        head = [str(n.get("name")) for n in nodes if int(n.get("rank") or 0) == 0]
        return head or [str(n.get("name")) for n in cut]
    return [str(n.get("name")) for n in cut]


def node_trouble(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the supervisors saw go wrong on a node itself, a row per finding: the nodes whose fabric
    path broke (``fabric_suspects``, with their ``check``), the node the fabric sweep found below
    aorta_fabric_min_gbps (``sweep_stops``), those that went silent
    (``silent_nodes``), then those whose output disk filled (``disk_full``). run_status names these
    nodes first; the diagnosis lists the rows."""
    by_name = {str(n.get("name")): n for n in nodes}
    rows = [
        {"node": name, "text": fabric_text(by_name[name].get("fabric") or {}), "check": by_name[name].get("fabric")}
        for name in fabric_suspects(nodes)
    ]
    rows += sweep_stops(nodes)
    # A node whose own link went down hears nothing from the head: its "the head went silent" is its
    # own cut seen from its side, not evidence against the head (which it would name first). A node
    # that only failed to reach the head keeps its claim: from one side, either end may be at fault.
    own_link_down = set(_links_down(nodes))
    rows += silent_nodes([_without_claims(n) if str(n.get("name")) in own_link_down else n for n in nodes])
    return rows + [{"node": str(n.get("name")), "text": disk_text(n["disk_full"])} for n in nodes if n.get("disk_full")]


def sweep_stops(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The node the head stopped the run for before any rank started because its fabric sweep figure
    was below aorta_fabric_min_gbps (``cluster_stop`` of kind ``fabric``, the same on every node)."""
    for record in nodes:
        stop = record.get("cluster_stop")
        if isinstance(stop, Mapping) and stop.get("kind") == "fabric" and stop.get("node"):
            return [{"node": str(stop["node"]), "text": str(stop.get("reason") or "below aorta_fabric_min_gbps")}]
    return []


def _without_claims(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without what it says of other nodes' silence."""
    return {key: value for key, value in record.items() if key not in ("cluster_stop", "silent_nodes")}


def silent_reasons(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Node -> why it went silent, from supervisor status records: ``cluster_stop`` of kind
    ``silent`` (the head heard nothing from the node, or a worker nothing from the head) and the
    head's ``silent_nodes`` (every node it counted as gone); the first reason given wins."""
    found: dict[str, str] = {}
    for record in records:
        stop = record.get("cluster_stop")
        if isinstance(stop, Mapping) and stop.get("kind") == "silent" and stop.get("node"):
            found.setdefault(str(stop["node"]), str(stop.get("reason") or "went silent"))
        silent = record.get("silent_nodes")
        for name, reason in silent.items() if isinstance(silent, Mapping) else ():
            found.setdefault(str(name), str(reason))
    return found


def silent_nodes(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The nodes that went silent during the run (``silent_reasons``), a row each. A silent node
    cannot say why it stopped: this is its evidence."""
    return [{"node": name, "text": text} for name, text in silent_reasons(nodes).items()]


def _laggard_nodes(nodes: Sequence[Mapping[str, Any]]) -> set[str]:
    """Nodes holding the ranks with the fewest completed steps, when ranks disagree."""
    steps = {}
    for node in nodes:
        for rank, count in (node.get("progress") or {}).items():
            steps[(node.get("name"), rank)] = int(count)
    if not steps or min(steps.values()) == max(steps.values()):
        return set()
    least = min(steps.values())
    return {str(name) for (name, _rank), count in steps.items() if count == least}


def fabric_text(fabric: Mapping[str, Any]) -> str:
    """What a node's fabric check found, in a few words."""
    if fabric.get("link_up") is False:
        carrier = ", no carrier" if fabric.get("carrier") is False else ""
        return f"fabric {fabric.get('interface')} {fabric.get('operstate')}{carrier}"
    if fabric.get("head_reached") is False:
        return f"fabric: head {fabric.get('head')} not reached from {fabric.get('interface')} ({fabric.get('error')})"
    # The head, named because no worker reached it.
    return f"fabric: no worker reached {fabric.get('head')}"


def how_it_ended(node: Mapping[str, Any]) -> str:
    """A node's state and its exit code, the code left out where none came back (an unreachable or
    never-started node): no Python literal in a user's text."""
    code = node.get("exit_code")
    return f"{node.get('state')}, exit {code}" if code is not None else str(node.get("state"))


def _describe(node: Mapping[str, Any], laggard: bool, trouble: str = "") -> str:
    failure = node.get("failure") or {}
    text = f"{node.get('name')} ({how_it_ended(node)}"
    if trouble:
        text += ", " + trouble
    if laggard:
        progress = node.get("progress") or {}
        low = min(progress.values())
        ranks = ",".join(str(r) for r, c in sorted(progress.items(), key=lambda i: int(i[0])) if c == low)
        text += f", rank {ranks} stuck after {low} steps"
    if failure:
        text += f", rank {failure['root_cause_rank']} exit {failure['root_cause_exit']} at {failure['root_cause_time']}"
        if failure.get("secondary"):
            text += " after a peer failed"
    return text + ")"


def node_line(node: Mapping[str, Any]) -> str:
    """One fixed-width line of the per-node table printed at the end of a run."""
    return "rank {:>4}  {:<28} {:<11} exit {:>4}  fabric {} on {}  log {}".format(
        str(node.get("rank")),
        str(node.get("name")),
        str(node.get("state")),
        "-" if node.get("exit_code") is None else str(node.get("exit_code")),
        node.get("vpc_ip") or "-",
        node.get("fabric_if") or "-",
        node.get("log") or "-",
    )


def node_table(nodes: Sequence[Mapping[str, Any]], every_node: bool = False) -> list[str]:
    """The run's end table, which does not grow with a healthy cluster: a ``node_line`` for each node
    that was not ok (for every node with ``every_node``: ``-v``), then one line of counts, by state
    and by fabric interface."""
    shown = [node_line(n) for n in nodes if every_node or n.get("state") != "ok"]
    states: dict[str, int] = {}
    interfaces: dict[str, int] = {}
    for node in nodes:
        states[str(node.get("state"))] = states.get(str(node.get("state")), 0) + 1
        interface = str(node.get("fabric_if") or "-")
        interfaces[interface] = interfaces.get(interface, 0) + 1
    order = {state: i for i, state in enumerate(STATES)}
    counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items(), key=lambda i: order.get(i[0], 99)))
    fabric = ", ".join(f"{name} on {n}" for name, n in sorted(interfaces.items()))
    return [*shown, f"nodes: {len(nodes)} ({counts}); fabric interface: {fabric}"]


_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):\s*\[\d+\]:\s*time\s*:\s*(\S+)\s*host\s*:\s*(\S+)\s*"
    r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)"
)
# Messages of a rank that failed because another rank went away first.
_SECONDARY = ("Connection closed by peer", "remote worker crashing", "Connection reset by peer", "Broken pipe")


def torchrun_failure(log_tail: str) -> dict[str, Any]:
    """What torchrun's error summary says about a node's failure (empty when there is none).

    ``secondary`` is true when the node's ranks died because a peer went away first, so the run's
    report can name the node where the failure started.
    """
    match = _ROOT_CAUSE.search(log_tail or "")
    if not match:
        return {}
    rank = int(match.group(3))
    # torchrun prefixes each worker's traceback lines with [rank<N>]:
    own_lines = [line for line in log_tail.splitlines() if line.startswith(f"[rank{rank}]:")]
    return {
        "root_cause_time": match.group(1),
        "root_cause_rank": rank,
        "root_cause_exit": int(match.group(4)),
        "secondary": any(text in line for line in own_lines for text in _SECONDARY),
    }
