# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One node's part of the trace collection, on the controller: the pull's throttle, the pulled
archive's check, and the node's manifest row (controller side).

Private to this collection. Every node's end runs in its own forked worker; the throttle is a set of
lock files, so at most ``aorta_collect_parallel`` pulls cross the controller's link at once
whatever the forks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any


@contextlib.contextmanager
def slot(directory: str, count: int, poll_s: float = 0.2, sleep=time.sleep) -> Iterator[int]:
    """Hold one of ``count`` slots (lock files in ``directory``) while the body runs."""
    os.makedirs(directory, exist_ok=True)
    count = max(1, int(count))
    while True:
        for index in range(count):
            handle = open(os.path.join(directory, f"slot{index}"), "a")  # noqa: SIM115 - held across the yield
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            try:
                yield index
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        sleep(poll_s)


def attempts(call: Callable[[], Any], slots: str, parallel: int, tries: int, delay_s: float, sleep=time.sleep):
    """``call`` under one of ``parallel`` slots (lock files in ``slots``), up to ``tries`` times,
    ``delay_s`` apart: its value on the first success, else the last error. ``call`` raises
    PullError (or OSError) for a transfer that did not arrive whole."""
    msg = ""
    for attempt in range(1, tries + 1):
        with slot(slots, parallel):
            try:
                return {"ok": True, "msg": "", "attempts": attempt, "value": call()}
            except (PullError, OSError) as exc:
                msg = str(exc)
        if attempt < tries:
            sleep(delay_s)
    return {"ok": False, "msg": msg, "attempts": tries, "value": None}


class PullError(Exception):
    """One transfer that did not arrive whole; the message says why."""


def staging_path(results_dir: str, rank: Any) -> str:
    """Where one node's archive lands on the controller: a directory per node, so concurrent pulls
    share no destination (rsync's --delay-updates once shared its holding directory .~tmp~ between
    two nodes' pulls and lost archives)."""
    return os.path.join(results_dir, ".staging", f"node_{int(rank)}", "traces.tar")


def staging_tree(results_dir: str, rank: Any) -> str:
    """Where one node's streamed files are unpacked as they arrive (beside its archive's place)."""
    return os.path.join(results_dir, ".staging", f"node_{int(rank)}", "tree")


def sha256_of(path: str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_row(
    node: Mapping[str, Any], state: str, pack: Mapping[str, Any] | None, local: str, error: str, pull: Mapping[str, Any]
) -> dict[str, Any]:
    """The row combined_traces verifies for one node (``node``: name, rank, mgmt_ip, vpc_ip)."""
    pack = pack or {}
    return {
        "rank": node["rank"],
        "name": node["name"],
        "mgmt_ip": node.get("mgmt_ip") or node["name"],
        "vpc_ip": node.get("vpc_ip"),
        "state": state,
        "archive": local if pack.get("archive") is not None and not error else "",
        "archive_sha256": pack.get("archive_sha256", ""),
        "compression": pack.get("compression", "none"),
        "files": pack.get("files", []),
        "error": error,
        "pull_msg": str(pull.get("msg", ""))[:300],
        "pull_attempts": int(pull.get("attempts", 1)),
    }
