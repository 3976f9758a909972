# SPDX-License-Identifier: GPL-3.0-or-later
"""The one atomic write: the old file or the new one, the mode from the first byte, no temporary
file left when the write fails."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic


def test_the_file_is_replaced_whole_with_its_mode_and_nothing_is_left_beside_it(tmp_path):
    path = tmp_path / "attach.json"
    path.write_text("old")
    old_umask = os.umask(0o022)
    try:
        write_text_atomic(str(path), "new", 0o600)
    finally:
        os.umask(old_umask)
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attach.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("kept")
    with pytest.raises(OSError):
        write_text_atomic(str(tmp_path / "no-such-dir" / "run.json"), "x")
    (tmp_path / "dir.json").mkdir()  # os.replace onto a directory fails after the temporary file was written
    with pytest.raises(OSError):
        write_text_atomic(str(tmp_path / "dir.json"), "x")
    assert path.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "run.json"]
