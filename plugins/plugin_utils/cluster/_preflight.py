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

import json
import tarfile
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import MESSAGE_MAX, clip, first_failure

GIB = 1024**3
FORCED_IFNAMES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
# The members of a ``docker save`` archive that name its images: docker's own manifest (every
# version), else the OCI index (docker 25+ writes both). Larger ones are not an image list.
ARCHIVE_INDEXES = ("manifest.json", "index.json")
ARCHIVE_INDEX_MAX = 16 << 20
ARCHIVE_NAMES_SHOWN = 3
# A failed node's msg, at most: the console prints it after ansible-core's "[ERROR]: Task failed:
# Action failed: " (37 characters), and that line stays under _run.MESSAGE_MAX.
NODE_MESSAGE_MAX = MESSAGE_MAX - 40


def image_key(reference: str) -> str:
    """``reference`` as docker compares names: the tag ``latest`` when none is given, and Docker
    Hub's ``docker.io/`` and ``library/`` left out (``ubuntu`` is ``docker.io/library/ubuntu:latest``)."""
    name = reference.strip()
    if "@" in name:
        return name
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    for prefix in ("docker.io/", "index.docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name[len("library/") :] if name.startswith("library/") else name


def _names_in(member: str, data: bytes) -> list[str]:
    """The image names one index member lists: manifest.json's ``RepoTags``, index.json's
    ``io.containerd.image.name`` annotations."""
    document = json.loads(data)
    if member == "manifest.json":
        return [str(tag) for entry in document or () for tag in (entry or {}).get("RepoTags") or ()]
    found = []
    for manifest in (document or {}).get("manifests") or ():
        name = ((manifest or {}).get("annotations") or {}).get("io.containerd.image.name")
        if name:
            found.append(str(name))
    return found


def archive_images(path: str) -> list[str] | None:
    """The image names a ``docker save`` archive on the controller holds, read from the tar's headers
    and its small index member, not its layers (the headers of a plain tar are read by seeking past
    each layer). None when that cannot be told so cheaply: a compressed archive (reading it costs
    what copying it does), one that cannot be read, or one with no index; the launch's load says then."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            indexes = {}
            for member in tar:
                name = member.name[2:] if member.name.startswith("./") else member.name
                if name in ARCHIVE_INDEXES and member.isfile() and member.size <= ARCHIVE_INDEX_MAX:
                    handle = tar.extractfile(member)
                    indexes[name] = handle.read() if handle else b""
            for name in ARCHIVE_INDEXES:
                if name in indexes:
                    return _names_in(name, indexes[name])
    except (OSError, tarfile.TarError, ValueError, AttributeError, TypeError):
        return None
    return None


def _image(node: str, facts: Mapping[str, Any], expect: Mapping[str, Any]) -> list[str]:
    """Whether the node has the image or can have it: loaded from the archive (there on the
    controller and holding it), else pulled in the probe itself (docker's own error when the
    registry says no), unless aorta_image_pull is ``never``."""
    if not (facts.get("docker") or {}).get("ok") or facts.get("image_id"):
        return []
    image, archive = str(expect.get("image", "")), str(expect.get("image_archive") or "")
    missing = f"preflight[image]: {node}: {image} is not on the node and"
    if archive:
        held = expect.get("archive_images")
        if not expect.get("archive_exists"):
            return [f"{missing} the archive {archive} does not exist on the controller"]
        if held is not None and "@" not in image and image_key(image) not in {image_key(n) for n in held}:
            shown = first_names(held, ARCHIVE_NAMES_SHOWN) or "no named image"
            return [f"{missing} the archive {archive} does not hold it (it holds {shown})"]
        return []
    if str(expect.get("image_pull") or "missing") == "never":
        return [f"{missing} aorta_image_pull is never (pull it there, or set aorta_image_archive)"]
    pull = facts.get("pull") or {}
    error = str(pull.get("error") or "")
    if pull.get("state") == "failed":
        return [f"{missing} cannot be pulled: {error or 'docker pull failed'}"]
    if pull.get("state") == "no answer":
        said = f": {error}" if error else ""
        return [
            f"{missing} docker pull had no answer from the registry in {float(pull.get('answer_s') or 0):g} s "
            f"(a registry or proxy that does not answer?){said}"
        ]
    return []


def message(failures: Sequence[str], limit: int = NODE_MESSAGE_MAX) -> str:
    """A failed node's msg: its first failure and how many more there are, cut at ``limit``
    characters, saying where the rest is (every failure whole in ``failures``, run.json's
    ``message`` and ``unhealthy``, and unhealthy.txt)."""
    return clip(first_failure(failures), limit)


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

    expect keys: image, image_archive, archive_exists, archive_images, image_pull, aorta_path, paths,
    min_free_gb, require_gpu, gpus_needed, vpc_ip, extra_env (the user's aorta_extra_env); on a
    worker, head and head_port (named when facts.connect says the head did not answer).
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
    image_present = bool(facts.get("image_id"))
    failures.extend(_image(node, facts, expect))
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
        "image_pull": str((facts.get("pull") or {}).get("state") or ""),
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
