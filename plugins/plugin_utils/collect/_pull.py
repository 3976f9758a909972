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
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import write_text_atomic


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


def keep_row(results_dir: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """Write a node's manifest row (a line per file, the streamed tree's hashes) beside its staging
    and return what its task result carries instead: the row's file and a few fields. A node's task
    result then stays small whatever the node holds; combined_traces reads the row back (``row_of``)."""
    path = os.path.join(results_dir, ".staging", f"node_{int(row['rank'])}", "row.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text_atomic(path, json.dumps(row))
    kept = {key: row.get(key) for key in ("rank", "name", "state", "error")}
    return dict(kept, files=len(row.get("files") or []), on_node=bool(row.get("on_node")), row_file=path)


def row_of(collect: Mapping[str, Any]) -> dict[str, Any]:
    """A node's whole manifest row from its task result's ``collect``: read from ``row_file``, which
    node_end wrote (an older result that carried the row itself is taken as it is)."""
    if "row_file" not in collect:
        return dict(collect)
    try:
        with open(str(collect["row_file"]), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        return {key: collect.get(key) for key in ("rank", "name", "state")} | {
            "files": [],
            "error": f"the row node_end kept at {collect['row_file']} cannot be read: {exc}",
        }
