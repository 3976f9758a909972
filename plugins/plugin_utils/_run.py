# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run bookkeeping: per-node outcome, the run's status, the fabric interface (controller side).

Private to this collection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError

STATES = ("ok", "failed", "timeout", "unreachable", "not_started")


def node_state(job: Mapping[str, Any] | None, timed_out: bool, unreachable: bool = False) -> dict[str, Any]:
    """One node's outcome from its async job result."""
    if unreachable:
        return {"state": "unreachable", "exit_code": None}
    if not job:
        return {"state": "not_started", "exit_code": None}
    if timed_out or not job.get("finished"):
        return {"state": "timeout", "exit_code": -1}
    rc = job.get("rc")
    if rc is None:  # the async wrapper itself gave up
        return {"state": "failed", "exit_code": -1}
    return {"state": "ok" if rc == 0 else "failed", "exit_code": int(rc)}


def run_status(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """COMPLETED when every node is ok; TIMEOUT when any timed out; else FAILED, naming the nodes."""
    if not nodes:
        return {"status": "FAILED", "failed_nodes": [], "message": "no nodes ran"}
    bad = [n for n in nodes if n.get("state") != "ok"]
    if not bad:
        return {"status": "COMPLETED", "failed_nodes": [], "message": f"all {len(nodes)} nodes completed"}
    status = "TIMEOUT" if any(n.get("state") == "timeout" for n in bad) else "FAILED"
    names = [str(n.get("name")) for n in bad]
    detail = ", ".join(f"{n.get('name')} ({n.get('state')}, exit {n.get('exit_code')})" for n in bad)
    return {
        "status": status,
        "failed_nodes": names,
        "message": f"{status} on {len(bad)} of {len(nodes)} nodes: {detail}",
    }


def fabric_interface(facts: Mapping[str, Any], address: str, node: str = "this node") -> str:
    """Name of the interface that holds ``address``, from gathered network facts.

    ``facts`` is ``ansible_facts`` (keys ``interfaces`` and one entry per interface).
    """
    seen = []
    for name in facts.get("interfaces", []):
        entry = facts.get(name.replace("-", "_")) or facts.get(name) or {}
        addresses = []
        if isinstance(entry.get("ipv4"), Mapping):
            addresses.append(entry["ipv4"].get("address"))
        addresses += [a.get("address") for a in entry.get("ipv4_secondaries", []) if isinstance(a, Mapping)]
        addresses += [a.get("address") for a in entry.get("ipv6", []) if isinstance(a, Mapping)]
        addresses = [a for a in addresses if a]
        if address in addresses:
            return name
        if addresses:
            seen.append(f"{name}={','.join(addresses)}")
    raise LaunchError(
        f"{node}: no interface holds the fabric address (vpc_ip) {address}; it has {'; '.join(seen) or 'none'}"
    )


def node_line(node: Mapping[str, Any]) -> str:
    """One fixed-width line of the per-node table printed at the end of a run."""
    return "rank {:>4}  {:<28} {:<11} exit {:>4}  fabric {} on {}  log {}".format(
        str(node.get("rank")),
        str(node.get("name")),
        str(node.get("state")),
        str(node.get("exit_code")),
        node.get("vpc_ip") or "-",
        node.get("fabric_if") or "-",
        node.get("log") or "-",
    )
