# SPDX-License-Identifier: GPL-3.0-or-later
"""_stream.pull: the node's packing script (module_utils/trace_analysis/_traces.py, sent on stdin) streams a run's
files, unpacked as they arrive; every way the stream can break is named and leaves no half tree.
The "node" here is a local python3 reading its script from stdin, as it does behind ssh."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _stream


def node_argv(root, compression="auto", floor=0.0):
    return ["sh", "-c", _stream.remote_command(sys.executable, str(root), floor, compression)]


@pytest.mark.parametrize("compression", ["auto", "gzip", "none"])
def test_a_run_streams_whole_with_the_nodes_hashes_and_ours(tmp_path, compression):
    root = tmp_path / "node" / "aorta_runs" / "r1"
    (root / "torch_profiler" / "rank1").mkdir(parents=True)
    body = os.urandom(2 << 20)
    (root / "torch_profiler" / "rank1" / "trace.json").write_bytes(body)
    (root / "rank_01_metrics.jsonl").write_text('{"step": 1}\n')
    got = _stream.pull(node_argv(root, compression), str(tmp_path / "tree"), 30)
    digest = hashlib.sha256(body).hexdigest()
    assert got["compression"] == ("zstd" if shutil.which("zstd") else "gzip") if compression == "auto" else compression
    assert [f["path"] for f in got["files"]] == ["rank_01_metrics.jsonl", "torch_profiler/rank1/trace.json"]
    assert got["files"][1] == {"path": "torch_profiler/rank1/trace.json", "size": len(body), "sha256": digest}
    assert got["arrived"]["torch_profiler/rank1/trace.json"] == [len(body), digest]
    assert (tmp_path / "tree" / "torch_profiler" / "rank1" / "trace.json").read_bytes() == body


def test_a_node_without_the_directory_sends_an_empty_verified_set(tmp_path):
    got = _stream.pull(node_argv(tmp_path / "missing"), str(tmp_path / "tree"), 30)
    assert got["files"] == [] and got["arrived"] == {}


def test_a_node_that_sends_no_stream_is_named_with_what_it_said(tmp_path):
    argv = ["sh", "-c", "cat >/dev/null; echo 'Permission denied (publickey).' >&2; exit 255"]
    with pytest.raises(_stream.StreamError, match=r"the node sent no trace stream \(rc 255\): Permission denied"):
        _stream.pull(argv, str(tmp_path / "tree"), 30)
    assert not (tmp_path / "tree").exists()


def test_a_stream_that_breaks_off_leaves_no_half_tree(tmp_path):
    root = tmp_path / "node"
    root.mkdir()
    (root / "trace.json").write_bytes(os.urandom(4 << 20))
    # The node's stream cut after 1 MB, as a dropped connection cuts it; ssh then exits 255.
    command = _stream.remote_command(sys.executable, str(root), 0, "none")
    argv = ["sh", "-c", f"{command} | head -c 1048576; exit 255"]
    with pytest.raises(_stream.StreamError, match=r"damaged archive|ssh ended with 255"):
        _stream.pull(argv, str(tmp_path / "tree"), 30)
    assert not (tmp_path / "tree").exists()


def test_a_stream_without_the_nodes_list_is_refused(tmp_path):
    # Whole tar, no trailing list: nothing says what the node meant to send.
    tar = tmp_path / "plain.tar"
    (tmp_path / "f.json").write_text("{}")
    shutil.make_archive(str(tar).removesuffix(".tar"), "tar", root_dir=tmp_path, base_dir="f.json")
    argv = ["sh", "-c", f"cat >/dev/null; printf 'AORTA-TRACES/1 none\\n'; cat {tar}"]
    with pytest.raises(_stream.StreamError, match="before the node's list of files"):
        _stream.pull(argv, str(tmp_path / "tree"), 30)
    assert not (tmp_path / "tree").exists()


def test_the_remote_command_quotes_every_part():
    assert _stream.remote_command("/usr/bin/python3", "/home/a b/$(x)", 12.5, "zstd") == (
        "/usr/bin/python3 - '/home/a b/$(x)' 12.5 zstd"
    )
