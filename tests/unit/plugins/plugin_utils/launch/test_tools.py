# SPDX-License-Identifier: GPL-3.0-or-later
"""Finding the controller's py-spy and naming the node's copy by its hash."""

from __future__ import annotations

import hashlib
import os

from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _tools


def test_a_given_path_is_named_on_the_node_by_its_hash(tmp_path):
    tool = tmp_path / "py-spy"
    tool.write_bytes(b"static binary")
    tool.chmod(0o755)
    plan = _tools.pyspy_plan(str(tool), "/var/tmp/aorta-cluster/tools/")
    digest = hashlib.sha256(b"static binary").hexdigest()
    assert plan == {
        "source": str(tool),
        "node_path": f"/var/tmp/aorta-cluster/tools/py-spy-{digest[:16]}",
        "sha256": digest,
        "size": len(b"static binary"),
        "note": "",
    }


def test_empty_switches_it_off_quietly_and_a_missing_one_is_said(tmp_path, monkeypatch):
    assert _tools.pyspy_plan("", "/t") == {"source": "", "node_path": "", "sha256": "", "size": 0, "note": ""}
    monkeypatch.setattr(_tools.sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", str(tmp_path))
    plan = _tools.pyspy_plan("auto", "/t")
    assert plan["source"] == "" and "pip install py-spy" in plan["note"]
    gone = _tools.pyspy_plan(str(tmp_path / "nowhere"), "/t")
    assert gone["source"] == "" and "aorta_pyspy" in gone["note"]


def test_auto_prefers_the_one_beside_this_python(tmp_path, monkeypatch):
    beside = tmp_path / "py-spy"
    beside.write_bytes(b"x")
    os.chmod(beside, 0o755)
    monkeypatch.setattr(_tools.sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _tools.find_pyspy("auto") == str(beside)
