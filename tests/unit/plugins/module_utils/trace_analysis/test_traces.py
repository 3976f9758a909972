# SPDX-License-Identifier: GPL-3.0-or-later
"""_traces.find_new_files: this run's files are the ones at or after the start floor, and a floor
read from the file system's own clock holds when that clock is not the node's (NFS)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _traces
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import (
    TraceError,
    find_new_files,
    pack,
    unpack,
)


def stamp(path, when):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (when, when))


def test_files_at_or_after_the_floor_are_taken_older_ones_and_excluded_dirs_are_not(tmp_path):
    floor = 1_000_000.0
    stamp(tmp_path / "old" / "trace.json", floor - 1)
    stamp(tmp_path / "same_second.json", floor)  # a coarse clock stamps it with the floor itself
    stamp(tmp_path / "new" / "trace.json", floor + 5)
    (tmp_path / "link.json").symlink_to(tmp_path / "new" / "trace.json")
    assert find_new_files(str(tmp_path), floor) == ["new/trace.json", "same_second.json"]
    assert find_new_files(str(tmp_path / "missing"), floor) == []


def test_a_file_server_behind_the_node_loses_nothing_with_the_file_systems_floor(tmp_path):
    # An NFS server 30 s behind the node stamps every file with its own clock, the file the
    # container writes at start included (run_container's .aorta-write-test, whose mtime is the
    # floor). The node's clock read at launch is ahead of every file this run writes.
    server_behind = 30.0
    node_clock_at_launch = time.time()
    marker = tmp_path / ".aorta-write-test"
    stamp(marker, node_clock_at_launch - server_behind)
    floor_from_the_file_system = os.stat(marker).st_mtime
    marker.unlink()
    stamp(tmp_path / "torch_profiler" / "rank0" / "trace.json", node_clock_at_launch + 10 - server_behind)
    assert find_new_files(str(tmp_path), node_clock_at_launch) == []  # the node's floor loses the trace
    assert find_new_files(str(tmp_path), floor_from_the_file_system) == ["torch_profiler/rank0/trace.json"]


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_pack_hashes_each_file_as_it_packs_and_unpack_gives_the_same_bytes(tmp_path, compression):
    if compression == "zstd" and shutil.which("zstd") is None:
        pytest.skip("no zstd command here")
    root = tmp_path / "run"
    (root / "torch_profiler" / "rank1").mkdir(parents=True)
    files = {"a.json": b'{"x": 1}' * 50000, "torch_profiler/rank1/trace.json": os.urandom(300000)}
    for rel, body in files.items():
        (root / rel).write_bytes(body)
    hashes = {}
    used = pack(str(root), sorted(files), str(tmp_path / "traces.tar"), compression, hashes=hashes)
    assert used == compression
    assert hashes == {rel: (len(body), hashlib.sha256(body).hexdigest()) for rel, body in files.items()}
    assert sorted(os.listdir(tmp_path)) == ["run", "traces.tar"]  # no .part or intermediate .tar left
    arrived = {}
    names = unpack(str(tmp_path / "traces.tar"), str(tmp_path / "out"), compression, hashes=arrived)
    assert sorted(names) == sorted(files)
    assert arrived == hashes  # taken while writing, the same as the node's
    for rel, body in files.items():
        assert (tmp_path / "out" / rel).read_bytes() == body


def test_a_damaged_zstd_archive_is_named_not_half_extracted_silently(tmp_path):
    if shutil.which("zstd") is None:
        pytest.skip("no zstd command here")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.json").write_bytes(os.urandom(200000))
    pack(str(tmp_path / "run"), ["a.json"], str(tmp_path / "traces.tar"), "zstd")
    data = (tmp_path / "traces.tar").read_bytes()
    (tmp_path / "traces.tar").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"traces\.tar"):
        unpack(str(tmp_path / "traces.tar"), str(tmp_path / "out"), "zstd")


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_pack_stream_sends_the_new_files_and_what_the_node_read_of_each(tmp_path, compression):
    if compression == "zstd" and shutil.which("zstd") is None:
        pytest.skip("zstd is not installed")
    floor = time.time() - 60
    root = tmp_path / "out"
    stamp(root / "old.json", floor - 10)
    (root / "torch_profiler" / "rank0").mkdir(parents=True)
    body = os.urandom(3 << 20)
    (root / "torch_profiler" / "rank0" / "trace.json").write_bytes(body)
    (root / _traces.PACK_MEMBER).write_text("a node's own file of that name is not sent as the list")
    stream = tmp_path / "stream"
    with open(stream, "wb") as out:
        assert _traces.pack_stream(str(root), floor, compression, out.fileno()) == 1
    raw = stream.read_bytes()
    first, _sep, rest = raw.partition(b"\n")
    assert first == _traces.STREAM_MAGIC + compression.encode()
    if compression == "zstd":
        rest = subprocess.run(["zstd", "-q", "-d", "-c"], input=rest, capture_output=True, check=True).stdout
        compression = "none"
    hashes, listed = {}, {}
    with open(tmp_path / "body", "wb") as handle:
        handle.write(rest)
    with open(tmp_path / "body", "rb") as handle:
        names = _traces.unpack_stream(handle, str(tmp_path / "dest"), "test", compression, hashes, listed)
    digest = hashlib.sha256(body).hexdigest()
    assert names == ["torch_profiler/rank0/trace.json"]
    assert listed == {"torch_profiler/rank0/trace.json": [len(body), digest]}
    assert hashes == {"torch_profiler/rank0/trace.json": (len(body), digest)}
    assert (tmp_path / "dest" / "torch_profiler" / "rank0" / "trace.json").read_bytes() == body
    assert not (tmp_path / "dest" / _traces.PACK_MEMBER).exists()


def test_a_stream_cut_short_is_named_as_damaged(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (root / "trace.json").write_bytes(os.urandom(1 << 20))
    stream = tmp_path / "stream"
    with open(stream, "wb") as out:
        _traces.pack_stream(str(root), 0, "none", out.fileno())
    cut = stream.read_bytes().partition(b"\n")[2][: 600 << 10]
    with pytest.raises(TraceError, match="the stream: damaged archive"), open(tmp_path / "cut", "wb+") as handle:
        handle.write(cut)
        handle.seek(0)
        _traces.unpack_stream(handle, str(tmp_path / "dest"), "the stream", "none")
