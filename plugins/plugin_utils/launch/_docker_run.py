# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``docker run`` command for the Aorta container, as an argv list (controller side).

Private to this collection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError

# What ROCm training needs without --privileged: GPU devices, the kernel-fusion driver's memory
# locking and a big stack, ptrace for profilers, IPC_LOCK for RDMA registration.
DEFAULT_CAPS = ("SYS_PTRACE", "IPC_LOCK")
# aorta_docker_ulimits' default (ROCm wants unlimited memlock and a 64 MiB stack), from the vocabulary.
DEFAULT_ULIMITS = tuple(DEFAULTS["aorta_docker_ulimits"])


def docker_run_argv(spec: Mapping[str, Any]) -> list[str]:
    """``docker run -d ...`` for one node.

    spec keys: name, image, mount_source, mount_target, (network, ipc, shm_size, privileged,
    devices, group_ids, labels, lifetime_seconds, docker).
    The container's own command is ``sleep <lifetime_seconds>``: a container that teardown never
    reaches (the controller died) still ends by itself once the run's deadlines are past.
    """
    for key in ("name", "image", "mount_source", "mount_target"):
        if not spec.get(key):
            raise LaunchError(f"docker_run_argv: {key} is required")
    argv = [str(spec.get("docker") or "docker"), "run", "-d", "--name", str(spec["name"])]
    for key, value in sorted((spec.get("labels") or {}).items()):
        argv += ["--label", f"{key}={value}"]
    argv += ["--network", str(spec.get("network") or "host"), "--ipc", str(spec.get("ipc") or "host")]
    if spec.get("shm_size"):
        argv += ["--shm-size", str(spec["shm_size"])]
    if spec.get("privileged"):
        argv.append("--privileged")
    argv += ["--user", "root"]
    for gid in spec.get("group_ids") or ():
        if not str(gid).isdigit():
            raise LaunchError(f"docker_run_argv: group id {gid!r} is not numeric")
        argv += ["--group-add", str(gid)]
    for device in spec.get("devices") or ():
        argv += ["--device", str(device)]
    for cap in DEFAULT_CAPS if spec.get("cap_add") is None else spec["cap_add"]:
        argv += ["--cap-add", str(cap)]
    argv += ["--security-opt", "seccomp=unconfined"]
    for ulimit in DEFAULT_ULIMITS if spec.get("ulimits") is None else spec["ulimits"]:
        argv += ["--ulimit", str(ulimit)]
    argv += ["-v", f"{spec['mount_source']}:{spec['mount_target']}:rw", "-w", str(spec["mount_target"])]
    lifetime = int(spec.get("lifetime_seconds") or 86400)
    argv += [str(spec["image"]), "sleep", str(lifetime)]
    return argv
