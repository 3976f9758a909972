# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller's copy of the tools the nodes get (controller side): py-spy for hang stacks.

Private to this collection. py-spy comes from PyPI into the controller's environment (requirements,
execution environment) as one static binary; the nodes get it once, by hash, in their tools
directory, and the supervisor copies it into the container only at a deadline.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import sha256_file

_HASHES: dict[tuple[str, int, float], str] = {}
_OFF = ("", "false", "False", "off", "none")


def _sha256(path: str) -> str:
    info = os.stat(path)
    key = (path, info.st_size, info.st_mtime)
    if key not in _HASHES:  # once per controller process: a probe per node must not rehash 8 MB
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def find_pyspy(setting: Any) -> str:
    """The controller's py-spy: ``setting`` is a path, ``auto`` (beside this Python, then PATH) or empty (off)."""
    text = "" if setting is None else str(setting).strip()
    if text in _OFF:
        return ""
    if text != "auto":
        return text
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("py-spy") or ""


def pyspy_plan(setting: Any, tools_dir: str) -> dict[str, Any]:
    """What the node needs: ``source`` (controller path, '' when none), ``node_path``, ``sha256``,
    ``size`` and ``note``."""
    source = find_pyspy(setting)
    if not source:
        note = (
            ""
            if str(setting).strip() in ("", "false", "False", "off", "none")
            else ("py-spy not found on the controller (pip install py-spy): a hang's report gets no Python stacks")
        )
        return {"source": "", "node_path": "", "sha256": "", "size": 0, "note": note}
    try:
        digest, size = _sha256(source), os.path.getsize(source)
    except OSError as exc:
        return {
            "source": "",
            "node_path": "",
            "sha256": "",
            "size": 0,
            "note": f"aorta_pyspy: {source}: {exc.strerror}",
        }
    node_path = f"{tools_dir.rstrip('/')}/py-spy-{digest[:16]}"
    return {"source": source, "node_path": node_path, "sha256": digest, "size": size, "note": ""}
