# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight's judgement of a node's health, and the drift of the nodes' fingerprints (controller side).

Private to this collection. The node reads (module_utils/node_runtime/_health.py); these pure functions decide.
A health failure is one line naming the check, the node and the reason, like every preflight line;
drift is a warning, one line per field that differs, whatever the node count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names

# Kernel-log kinds that fail a node (the hardware's and the driver's own); the others (an OOM
# kill, a hung task, a page fault) are usually a program's and are reported, not failed.
FAILING_KERNEL_KINDS = frozenset(("amdgpu", "gpu reset", "xgmi", "ras", "mce", "nic link down", "rdma", "pcie"))
# The fingerprint's fields in the order the report shows them, with the words the console uses.
FIELDS = (
    ("kernel", "kernel"),
    ("rocm", "ROCm"),
    ("amdgpu", "amdgpu driver"),
    ("gpu_model", "GPU model"),
    ("vbios", "VBIOS"),
    ("nic_driver", "fabric NIC driver"),
    ("nic_model", "fabric NIC model"),
    ("nic_firmware", "fabric NIC firmware"),
    ("link_speed_mbps", "fabric link speed (Mb/s)"),
    ("link_mtu", "fabric MTU"),
    ("docker", "docker"),
    ("image_id", "image id"),
)
FIRST_NODES = 3  # nodes named per drift line before "and N more"


def judge(node: str, health: Mapping[str, Any] | None, expect: Mapping[str, Any]) -> list[str]:
    """One ``preflight[health]`` line per failed check. ``expect`` keys: require_gpu, gpus_needed,
    slow_s (the GPU tool's answer bound), step_timeout. The node needs no rsync: node_end streams
    the traces over the node's own Ansible connection, so its absence fails nothing."""
    if not health:
        return []
    failures: list[str] = []
    tool = health.get("tool") or "the GPU tool"
    steps = health.get("steps") or []
    hung = [s for s in steps if s.get("timed_out")]
    if hung:
        bound = float(expect.get("step_timeout") or 0)
        failures.append(
            f"preflight[health]: {node}: {hung[0]['name']} gave no answer within {bound:g} s "
            "(the driver may be wedged; later GPU tool steps not run)"
        )
    else:
        slow_s = float(expect.get("slow_s") or 0)
        slowest = max(steps, key=lambda s: float(s.get("seconds") or 0), default=None)
        if slow_s and slowest and float(slowest.get("seconds") or 0) > slow_s:
            failures.append(
                f"preflight[health]: {node}: {slowest['name']} took {float(slowest['seconds']):.1f} s, over the "
                f"{slow_s:g} s bound (aorta_gpu_tool_slow_seconds): the driver may be wedged"
            )
    if expect.get("require_gpu") and not hung:
        failures.extend(_count(node, tool, health.get("count") or {}, int(expect.get("gpus_needed") or 0)))
    leaked = [p for p in health.get("processes") or () if not p.get("allowed")]
    if leaked:
        named = first_names((f"pid {p['pid']} {p['name']} (user {p['user']})" for p in leaked[:5]), 5, len(leaked))
        failures.append(
            f"preflight[health]: {node}: {len(leaked)} process(es) already hold a GPU: {named} "
            "(stop them, or list a monitoring agent in aorta_gpu_process_allow)"
        )
    ecc = health.get("ecc") or {}
    if int(ecc.get("uncorrectable") or 0) > 0:
        gpus = [str(g.get("gpu")) for g in ecc.get("gpus") or () if int(g.get("uncorrectable") or 0) > 0]
        on = ", ".join(gpus) or "?"
        failures.append(f"preflight[health]: {node}: {ecc['uncorrectable']} uncorrectable ECC error(s) on GPU {on}")
    kernel = health.get("kernel") or {}
    bad = [line for line in kernel.get("lines") or () if line.get("kind") in FAILING_KERNEL_KINDS]
    if bad:
        kinds = sorted({line["kind"] for line in bad})
        failures.append(
            f"preflight[health]: {node}: {len(bad)} GPU/NIC error(s) in the kernel log since "
            f"{kernel.get('since_source', 'the window')} ({', '.join(kinds)}): {bad[-1]['line'][:160]}"
        )
    return failures


def _count(node: str, tool: str, count: Mapping[str, Any], needed: int) -> list[str]:
    logical, physical = count.get("logical"), count.get("physical")
    if logical is None:
        return [f"preflight[gpu]: {node}: {tool} could not count the GPUs: {count.get('error', '')}".rstrip(": ")]
    if logical < needed:
        return [f"preflight[gpu]: {node}: {logical} GPUs seen by {tool}, {needed} needed (aorta_gpus_per_node)"]
    if count.get("partitioned") and needed != logical:
        # Ranks 0..needed-1 would land on the partitions of the first devices: a benchmark sharing its GPUs.
        return [
            f"preflight[gpu]: {node}: {tool} lists {logical} GPUs on {physical} devices (a compute partition mode): "
            f"{needed} ranks would share devices; set aorta_gpus_per_node to {logical} or switch the GPUs to SPX"
        ]
    return []


def summary(health: Mapping[str, Any] | None) -> dict[str, Any]:
    """What run.json and the report keep of a node's health: counts, not the tools' output."""
    if not health:
        return {}
    ecc = health.get("ecc") or {}
    kernel = health.get("kernel") or {}
    count = health.get("count") or {}
    return {
        "tool": health.get("tool"),
        "gpus": count.get("logical"),
        "devices": count.get("physical"),
        "tool_seconds": max((float(s.get("seconds") or 0) for s in health.get("steps") or ()), default=None),
        "processes": [{k: p.get(k) for k in ("pid", "name", "user", "allowed")} for p in health.get("processes") or ()],
        "ecc_correctable": ecc.get("correctable"),
        "ecc_uncorrectable": ecc.get("uncorrectable"),
        "kernel": "unknown" if kernel.get("error") else len(kernel.get("lines") or ()),
        "kernel_since": kernel.get("since_source"),
        "seconds": health.get("seconds"),
    }


def drift(fingerprints: Mapping[str, Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """Each fingerprint field on which some nodes differ from the majority: ``{field, label,
    majority, count, nodes: [(node, value)], of}`` (``majority`` None on a tie: every node is then
    listed). Values a node could not read are left out."""
    found = []
    for field, label in FIELDS:
        values = {node: (fp or {}).get(field) for node, fp in fingerprints.items()}
        known = {node: str(value) for node, value in values.items() if value not in (None, "")}
        counts = Counter(known.values())
        if len(counts) < 2:
            continue
        ranked = counts.most_common()
        # A tie has no majority (two nodes that differ): every node is then named with its value.
        majority = ranked[0][0] if ranked[0][1] > ranked[1][1] else None
        differ = [(node, value) for node, value in known.items() if value != majority]
        found.append(
            {
                "field": field,
                "label": label,
                "majority": majority,
                "count": len(differ),
                "of": len(known),
                "nodes": differ,
            }
        )
    return found


def drift_lines(found: Sequence[Mapping[str, Any]], first: int = FIRST_NODES) -> list[str]:
    """One warning line per field, whatever the node count."""
    lines = []
    for item in found:
        named = first_names((f"{node} ({value})" for node, value in list(item["nodes"])[:first]), first, item["count"])
        against = f"differ from {item['majority']}" if item["majority"] is not None else "differ, no majority"
        lines.append(
            f"preflight[drift]: WARNING {item['label']}: {item['count']} of {item['of']} nodes {against}: {named}"
        )
    return lines


def fingerprint_drift(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{fields, lines}`` of run.json's node rows (each with ``name`` and ``fingerprint``): the
    drift of each field and its console lines."""
    found = drift({str(row.get("name")): row.get("fingerprint") for row in rows if row.get("fingerprint")})
    return {"fields": found, "lines": drift_lines(found)}


def unhealthy(
    names: Sequence[str], prepared: Sequence[Mapping[str, Any] | None], messages: Sequence[Any], own: Sequence[Any]
) -> list[dict[str, Any]]:
    """The nodes whose own preflight failed (unreachable ones included), each with its reasons:
    ``[{name, reasons}]`` in rank order. A worker that passed its own checks but was not held because
    the head failed is not one of them. ``messages``/``own``: each node's rescue (empty when none ran)."""
    found = []
    for name, answer, message, mine in zip(names, prepared, messages, own):
        result = answer or {}
        # Excluded (aorta_exclude_unhealthy) is a failed preflight the run went on without.
        if not (mine and message) and not result.get("failed") and not result.get("excluded"):
            continue
        if result.get("own") is False:
            continue
        reasons = [str(r) for r in result.get("failures") or ()] or [str(result.get("msg") or message)]
        found.append({"name": str(name), "reasons": reasons})
    return found


def unhealthy_text(found: Sequence[Mapping[str, Any]]) -> str:
    """unhealthy.txt: one line per reason, ``<node><TAB><reason>``, the node first so that
    ``cut -f1 | sort -u`` lists the nodes to exclude; a reason's own line breaks and tabs (ssh's
    error has them) become single spaces."""
    return "".join(f"{item['name']}\t{' '.join(reason.split())}\n" for item in found for reason in item["reasons"])


def health_record(
    rows: Sequence[Mapping[str, Any]],
    prepared: Sequence[Mapping[str, Any] | None],
    messages: Sequence[Any],
    own: Sequence[Any],
) -> dict[str, Any]:
    """What run.json, the console and unhealthy.txt say of the nodes' health: the drift of their
    fingerprints (``drift``, ``drift_lines``) and the nodes that failed preflight (``unhealthy``,
    ``unhealthy_text``). ``rows``: run.json's node rows in rank order; the rest per row."""
    names = [str(row.get("name")) for row in rows]
    found = fingerprint_drift(rows)
    bad = unhealthy(names, prepared, messages, own)
    return {
        "drift": found["fields"],
        "drift_lines": found["lines"],
        "unhealthy": bad,
        "unhealthy_text": unhealthy_text(bad),
    }
