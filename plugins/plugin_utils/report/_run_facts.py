# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What run.json adds to the report: the run's own status, id, times, context and throughput
(``run_summary``), and the fabric sweep's slow links with the traces' collective figures.

Private to this collection; controller side.
"""

from __future__ import annotations

import json
import os
import statistics

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import (
    ReportError,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.report._report import bus_factor


def read_run_record(traces_dir: str, run_json: str | None) -> tuple:
    """(run.json's content or None, its path or ''): the given file, else the one beside the traces."""
    path = run_json or os.path.join(os.path.dirname(os.path.abspath(traces_dir.rstrip("/"))), "run.json")
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        if run_json:
            raise ReportError(f"run_json: {run_json} is not a readable run.json") from None
        return None, ""
    return (record, path) if isinstance(record, dict) and "run_id" in record else (None, "")


def run_summary(record: dict | None, path: str, report: dict) -> dict:
    """What a performance engineer reads first, before any chart: the run's own status (not the
    analysis'), id, times, what ran and with what, and the throughput the steps give."""
    if not record:
        return {"record": None, "status": None, "note": "no run record: a folder of traces, not a run's results"}
    context = record.get("context") or {}
    settings = context.get("settings") or {}
    started, finished = record.get("started_epoch"), record.get("finished_epoch")
    duration = finished - started if isinstance(started, (int, float)) and isinstance(finished, (int, float)) else None
    step_ms = report["performance"].get("avg_step_time_ms")
    ranks = len(report["per_rank_summary"])
    batch, sequence = settings.get("batch_size"), settings.get("sequence_length")
    # Aorta is data-parallel over every rank (FSDP) and steps the optimizer once per batch.
    samples = batch * ranks / (step_ms / 1000.0) if batch and step_ms and ranks else None
    return {
        "record": path,
        "status": record.get("status"),
        "message": record.get("message"),
        "run_id": record.get("run_id"),
        "started_epoch": started,
        "finished_epoch": finished,
        "duration_seconds": duration,
        "image": context.get("image"),
        "image_id": context.get("image_id"),
        "base_config": context.get("base_config"),
        "overrides": context.get("overrides"),
        "launch_mode": context.get("launch_mode"),
        "head": record.get("head"),
        "master": f"{record['master_addr']}:{record.get('master_port')}" if record.get("master_addr") else None,
        "nodes": context.get("nodes", len(record.get("nodes") or [])),
        # Left out by preflight (aorta_exclude_unhealthy) and the fingerprint fields that differ.
        "excluded": [
            {"name": e.get("name"), "reason": (e.get("reasons") or [""])[0]} for e in record.get("excluded") or ()
        ],
        "drift": [
            f"{d.get('label')}: {d.get('count')} of {d.get('of')} nodes differ" for d in record.get("drift") or ()
        ],
        "gpus_per_node": context.get("gpus_per_node"),
        "batch_size": batch,
        "sequence_length": sequence,
        "data_parallel_ranks": ranks,
        "samples_per_second": samples,
        "tokens_per_second": samples * sequence if samples and sequence else None,
        "note": settings.get("note")
        or ("" if samples else "no throughput: the batch size or the step time is not known"),
    }


def fabric_sweep_summary(record: dict | None) -> dict | None:
    """The report's ``fabric_sweep``: run.json's fabric sweep before the ranks started, summed up
    (each node's figures stay in run.json): whether it ran (else why not), its tool, length,
    threshold, minimum, median, whether it could localise (else why not) and how many nodes it
    named, could not localise and did not measure; None without a run record or for one of an
    earlier version (no ``fabric_sweep``)."""
    sweep = (record or {}).get("fabric_sweep")
    if not isinstance(sweep, dict):
        return None
    if not sweep.get("ran"):
        return {"ran": False, "why": str(sweep.get("why") or "not recorded")}
    return {
        "ran": True,
        **{key: sweep.get(key) for key in ("tool", "seconds", "threshold", "min_gbps", "median_gbps")},
        "localisable": sweep.get("localisable"),
        "reason": sweep.get("reason"),
        "rounds": len(_listed(sweep, "rounds")),
        "slow_count": _count(sweep, "slow"),
        "unresolved_count": _count(sweep, "unresolved"),
        "not_measured_count": _count(sweep, "not_measured"),
    }


def _listed(sweep: dict, key: str) -> list:
    value = sweep.get(key)
    return value if isinstance(value, list) else []


def _count(sweep: dict, key: str) -> int:
    """``<key>_count`` as run.json has it, else the length of its list ``key``."""
    value = sweep.get(f"{key}_count")
    return value if isinstance(value, int) and not isinstance(value, bool) else len(_listed(sweep, key))


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def worst_busbw(table: list) -> tuple:
    """(op, bus bandwidth in GB/s) of the collective op whose calls moved the fewest bus bytes per
    second: per op, over its sizes and groups, the sum of size x calls x nccl-tests' factor over
    its kernel time (each row's busbw_gbps weighted by its time, so that a few tiny calls, bound by
    latency, do not speak for the op); (None, None) without a collective of known size and factor."""
    moved: dict = {}
    spent: dict = {}
    for row in table:
        factor = bus_factor(row["op"], row.get("group_size"))
        if factor is None or not row.get("time_ms"):
            continue
        moved[row["op"]] = moved.get(row["op"], 0.0) + row["size_bytes"] * row["count"] * factor
        spent[row["op"]] = spent.get(row["op"], 0.0) + row["time_ms"] / 1000.0
    rates = {op: moved[op] / spent[op] / 1e9 for op in moved}
    if not rates:
        return None, None
    op = min(rates, key=lambda name: (rates[name], name))
    return op, rates[op]


def node_collective_times(ranks: list, per_node: int | None = None) -> dict:
    """{node: the median over its ranks of the time each spends in collectives (comm_time_ms)}, a
    rank's node its row's, or with ``per_node`` its node rank: ranks are laid out node by node
    (rank // ranks per node)."""
    spent_by_node: dict = {}
    for row in ranks:
        spent = _number(row.get("comm_time_ms"))
        if spent is None or not isinstance(row.get("rank"), int):
            continue
        node = row["rank"] // per_node if per_node else str(row.get("node"))
        spent_by_node.setdefault(node, []).append(spent)
    return {node: statistics.median(values) for node, values in spent_by_node.items()}


def collective_ratio(nodes: dict, node) -> float | None:
    """``node``'s time in collectives against the median node's (``nodes``: node_collective_times);
    None when the traces hold no communication, the node has no rank here, or there are fewer than
    two nodes."""
    if node not in nodes or len(nodes) < 2:
        return None
    middle = statistics.median(nodes.values())
    return round(nodes[node] / middle, 3) if middle > 0 else None


def slow_links(sweep, report: dict) -> list:
    """The report's ``slow_links``: one entry per node run.json's fabric sweep named slow, with its
    sweep figures, the time its ranks spend in collectives against the median node's
    (``collective_ratio``) and the worst collective op's bus bandwidth, in Gbit/s, against the
    sweep's median (``busbw_ratio``, ``busbw_op``); [] when the sweep did not run or named nobody."""
    if not isinstance(sweep, dict) or not sweep.get("ran"):
        return []
    median = _number(sweep.get("median_gbps"))
    op, busbw = worst_busbw(report.get("collective_table") or [])
    busbw_ratio = round(busbw * 8.0 / median, 3) if busbw is not None and median else None
    per_node = (report.get("run") or {}).get("gpus_per_node") or (report.get("cluster") or {}).get("gpus_per_node")
    ranks = report.get("per_rank_summary") or []
    # A node is found by its name among the ranks' nodes, else by its node rank.
    by_name = node_collective_times(ranks)
    by_rank = node_collective_times(ranks, per_node) if isinstance(per_node, int) and per_node > 0 else {}
    links = []
    for item in (i for i in _listed(sweep, "slow") if isinstance(i, dict)):
        name, rank = str(item.get("node")), item.get("rank")
        ratio = collective_ratio(by_name, name) if name in by_name else collective_ratio(by_rank, rank)
        links.append(
            {
                "node": item.get("node"),
                "node_rank": rank,
                "direction": item.get("direction"),
                "send_gbps": item.get("send_gbps"),
                "recv_gbps": item.get("recv_gbps"),
                "median_gbps": item.get("median_gbps", median),
                "ratio": item.get("ratio"),
                "collective_ratio": ratio,
                "busbw_ratio": busbw_ratio,
                "busbw_op": op if busbw_ratio is not None else None,
            }
        )
    return links


def fabric_findings(record: dict | None, report: dict) -> dict:
    """The report's ``fabric_sweep`` and ``slow_links`` from run.json (``record``) and the traces'
    figures in ``report`` (its ranks, collectives and run)."""
    sweep = (record or {}).get("fabric_sweep")
    return {"fabric_sweep": fabric_sweep_summary(record), "slow_links": slow_links(sweep, report)}
