# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scaling campaign's figures (controller side, pure): what each group's own results say, read
into what the localisation judges (plugin_utils/campaign/_localise.py), and each rung's figures:
groups, median iteration time, throughput per node, weak-scaling efficiency against rung 1, the
slowest group and the spread.

Each group's results directory is an ordinary run's (run.json, aorta_benchmark_report.json): this
reads the keys those already have, so a campaign says nothing its runs do not.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import STOP_WORDS


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def positive(value: Any) -> float | None:
    """A figure above 0, else None (a run that measured nothing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value > 0 else None


def named_nodes(record: Mapping[str, Any], report: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The nodes a group's own run named, each ``{node, kind, why}``: the node it failed on first
    (run.json's ``first_failure``, its status and message; every failed node where each failed its
    own check for one reason), the fabric sweep's slow nodes, and the report's slow nodes and
    straggler ranks' nodes."""
    found: list[dict[str, str]] = []
    status = str(record.get("status") or "")
    message = str(record.get("message") or status)
    if status and status != "COMPLETED":
        # The node the run says the trouble started on: failed_nodes lists every node that was not
        # ok, the ranks that only lost a peer and, in a timeout, every node that waited. Every node
        # only where each failed its own check for one reason (an image no node holds).
        failed = [str(node) for node in _list(record.get("failed_nodes"))]
        first = record.get("first_failure")
        origin = failed if message.startswith("every node: ") else [str(first)] if first else []
        for node in origin:
            found.append({"node": node, "kind": status.lower(), "why": message})
    sweep = _dict(record.get("fabric_sweep"))
    for item in (_dict(i) for i in _list(sweep.get("slow"))):
        why = f"fabric sweep: {item.get('direction')} {item.get('ratio')}x its run's median"
        found.append({"node": str(item.get("node")), "kind": "slow_link", "why": why})
    report = report or {}
    for item in (_dict(i) for i in _list(report.get("slow_nodes"))):
        found.append({"node": str(item.get("node")), "kind": "slow_node", "why": "its run's report: a slow node"})
    for item in (_dict(i) for i in _list(report.get("stragglers"))):
        why = f"its run's report: rank {item.get('rank')} a straggler"
        found.append({"node": str(item.get("node")), "kind": "straggler", "why": why})
    return found


def group_run(record: Mapping[str, Any], report: Mapping[str, Any] | None, where: str = "") -> dict[str, Any]:
    """One group's run as the localisation and the figures read it: its nodes in rank order (the
    head first), status, median iteration (the report's average step time), samples per second,
    the nodes it named and each node's link figures from its fabric sweep."""
    rows = sorted((_dict(n) for n in _list(record.get("nodes"))), key=lambda n: n.get("rank") or 0)
    report = report or {}
    run = _dict(report.get("run"))
    links = {
        str(row.get("name")): {
            "send_gbps": _dict(row.get("fabric_sweep")).get("send_gbps"),
            "recv_gbps": _dict(row.get("fabric_sweep")).get("recv_gbps"),
        }
        for row in rows
        if _dict(row.get("fabric_sweep"))
    }
    return {
        "nodes": [str(row.get("name")) for row in rows],
        "run_id": record.get("run_id"),
        "dir": where,
        "status": str(record.get("status") or "FAILED"),
        # aorta.cluster.stop ended it (by its id or the campaign's: a STOPPED run, or one refused its
        # nodes by the campaign's stop): the operator's doing, no evidence against a node.
        "stopped_from_outside": STOP_WORDS in str(record.get("message") or ""),
        "iteration_ms": positive(_dict(report.get("performance")).get("avg_step_time_ms")),
        "samples_per_second": positive(run.get("samples_per_second")),
        "named": named_nodes(record, report),
        "links": links,
    }


def per_node(run: Mapping[str, Any]) -> float | None:
    """A group's samples per second per node."""
    samples, nodes = positive(run.get("samples_per_second")), len(_list(run.get("nodes")))
    return samples / nodes if samples and nodes else None


def rung_figures(
    size: int, runs: Sequence[Mapping[str, Any]], alone: float | None, left_out: Sequence[str] = ()
) -> dict[str, Any]:
    """Rung ``size``'s figures from its groups' ``runs`` (``group_run``); ``alone``: rung 1's median
    throughput per node, the weak-scaling reference (efficiency = this rung's median per node over
    it: 1.0 when adding nodes costs nothing)."""
    done = [run for run in runs if run.get("status") == "COMPLETED"]
    times = [t for t in (positive(run.get("iteration_ms")) for run in done) if t]
    rates = [r for r in (per_node(run) for run in done) if r]
    median_rate = statistics.median(rates) if rates else None
    slowest = max(done, key=lambda run: positive(run.get("iteration_ms")) or 0.0, default=None)
    return {
        "size": size,
        "group_count": len(runs),
        "completed": len(done),
        "left_out": list(left_out),
        "median_iteration_ms": round(statistics.median(times), 3) if times else None,
        "samples_per_second_per_node": round(median_rate, 3) if median_rate else None,
        "efficiency": round(median_rate / alone, 3) if median_rate and alone else None,
        "slowest_group": list(slowest["nodes"]) if slowest and len(times) >= 2 else None,
        # The slowest group's iteration over the fastest's: 1.0 when every group ran alike.
        "spread": round(max(times) / min(times), 3) if len(times) >= 2 else None,
    }
