# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight's judgement of one node's probe (controller side).

Private to this collection. The node gathers facts in one module run (module_utils/node_runtime/_probe.py);
these pure functions decide, with one message per failed check naming the check, the node, the
key and the fix, and derive what the launch needs (fabric interface and environment, the address
the head's bootstrap advertises, the record run.json keeps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError

GIB = 1024**3
FORCED_IFNAMES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def interface_holding(interfaces: Mapping[str, Sequence[str]], address: str, node: str = "this node") -> str:
    """Name of the interface that holds ``address``; the error names every address the node has."""
    seen = []
    for name, addresses in interfaces.items():
        if address in addresses:
            return name
        if addresses:
            seen.append(f"{name}={','.join(addresses)}")
    raise LaunchError(
        f"{node}: no interface holds the fabric address (vpc_ip) {address}; it has {'; '.join(seen) or 'none'}"
    )


def judge(node: str, facts: Mapping[str, Any], expect: Mapping[str, Any]) -> dict[str, Any]:
    """``{"failures": [message, ...], "derived": {...}}`` for one node's probe.

    expect keys: image, image_archive, archive_exists, aorta_path, paths, min_free_gb,
    require_gpu, gpus_needed, vpc_ip, extra_env (the user's aorta_extra_env); on a worker, head and
    head_port (named when facts.connect says the head did not answer).
    """
    failures: list[str] = []
    docker = facts.get("docker") or {}
    if not docker.get("ok"):
        error = str(docker.get("error", ""))
        hint = (
            " (this user cannot use docker without sudo: add it to the docker group)"
            if "permission denied" in error.lower()
            else ""
        )
        failures.append(f"preflight[docker]: {node}: docker does not answer: {error}".rstrip() + hint)
    image, archive = expect.get("image", ""), expect.get("image_archive") or ""
    image_present = bool(facts.get("image_id"))
    if docker.get("ok") and not image_present and archive and not expect.get("archive_exists"):
        failures.append(
            f"preflight[image]: {node}: {image} is not on the node and the archive {archive} "
            "does not exist on the controller"
        )
    aorta_path = expect.get("aorta_path", "")
    for path in expect.get("paths") or ():
        if not (facts.get("paths") or {}).get(path):
            failures.append(f"preflight[aorta_path]: {node}: {path} not found under {aorta_path}")
    disk = facts.get("disk") or {}
    free_gib = None if disk.get("free_bytes") is None else round(disk["free_bytes"] / GIB, 1)
    if free_gib is None:
        failures.append(f"preflight[disk]: {node}: cannot read free space at {aorta_path}: {disk.get('error', '')}")
    elif disk["free_bytes"] < float(expect.get("min_free_gb") or 0) * GIB:
        failures.append(
            f"preflight[disk]: {node}: {free_gib} GiB free at {aorta_path}, {expect.get('min_free_gb')} GiB needed"
        )
    if expect.get("require_gpu"):
        for device, present in sorted((facts.get("gpu_devices") or {}).items()):
            if not present:
                failures.append(f"preflight[gpu]: {node}: {device} is missing (amdgpu driver not loaded?)")
        count = (facts.get("gpus") or {}).get("count") or 0
        # With the health checks, their count judges (partition modes, the tool that counted).
        if "health" not in facts and count < int(expect.get("gpus_needed") or 0):
            failures.append(
                f"preflight[gpu]: {node}: {count} GPUs seen by amd-smi/rocm-smi, {expect.get('gpus_needed')} needed"
            )
    derived = _fabric(node, facts, expect, failures)
    connect = facts.get("connect")
    if connect and not connect.get("reached") and derived.get("fabric_env"):
        failures.append(unreached_head(node, expect, derived, connect))
    derived["record"] = {
        "docker": docker.get("version", ""),
        "image_present": image_present,
        "free_gib": free_gib,
        "fabric_ip": expect.get("vpc_ip"),
        "fabric_if": derived.get("fabric_if", ""),
    }
    return {"failures": failures, "derived": derived}


def unreached_head(node: str, expect: Mapping[str, Any], derived: Mapping[str, Any], connect: Mapping[str, Any]) -> str:
    """A worker that cannot reach the head's rendezvous address: which interface, and why it was chosen."""
    vpc_ip, fabric_if = expect.get("vpc_ip"), derived.get("fabric_if")
    gloo = derived["fabric_env"]["GLOO_SOCKET_IFNAME"]
    why = (
        f"(set by aorta_extra_env; the fabric address {vpc_ip} is on {fabric_if})"
        if gloo != fabric_if
        else "(the fabric interface)"
    )
    return (
        f"preflight[fabric]: {node} ({vpc_ip} on {fabric_if}) cannot reach the head {expect.get('head')} at "
        f"{connect.get('host', expect.get('head_address'))} port {expect.get('head_port')}, its address on "
        f"GLOO_SOCKET_IFNAME={gloo} {why}: {connect.get('error', '')}"
    )


def _fabric(node: str, facts: Mapping[str, Any], expect: Mapping[str, Any], failures: list[str]) -> dict[str, Any]:
    """The fabric interface, the environment that pins gloo/NCCL to it, and the head's bootstrap address."""
    interfaces = facts.get("interfaces") or {}
    vpc_ip = str(expect.get("vpc_ip") or "")
    if facts.get("error"):
        failures.append(f"preflight[fabric]: {node}: cannot list the interfaces: {facts['error']}")
        return {}
    try:
        fabric_if = interface_holding(interfaces, vpc_ip, node)
    except LaunchError as exc:
        failures.append(f"preflight[fabric]: {exc}")
        return {}
    extra_env = expect.get("extra_env") or {}
    for name in FORCED_IFNAMES:
        if name not in extra_env:
            continue
        wanted = [part.lstrip("^=") for part in str(extra_env[name]).split(",")]
        if any(part not in interfaces for part in wanted):
            failures.append(
                f"preflight[fabric]: {node}: {name}={extra_env[name]} names no interface of this node "
                f"(it has {', '.join(interfaces)}; its fabric address {vpc_ip} is on {fabric_if})"
            )
    env = {name: str(extra_env.get(name, fabric_if)) for name in FORCED_IFNAMES}
    gloo_first = env["GLOO_SOCKET_IFNAME"].split(",")[0].lstrip("^=")
    own = [a for a in interfaces.get(gloo_first, []) if ":" not in a]
    bootstrap_ip = vpc_ip if env["GLOO_SOCKET_IFNAME"] == fabric_if else (own[0] if own else vpc_ip)
    return {"fabric_if": fabric_if, "fabric_env": env, "bootstrap_ip": bootstrap_ip}
