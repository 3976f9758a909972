# SPDX-License-Identifier: GPL-3.0-or-later
"""The capture at the deadline, run for real on this machine: a rank-like child process (torchrun's
environment), its flight-recorder pipe served the way torch's dump pipe does, and real py-spy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _capture

PYSPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")

# A rank: torchrun's variables, a dump pipe like torch's DumpPipe, then blocked in a function of its own.
RANK_PROGRAM = textwrap.dedent(
    """
    import os, sys, threading, time
    stem, dump = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    rank = os.environ["RANK"]
    os.mkfifo(stem + rank + ".pipe")
    def serve():
        with open(stem + rank + ".pipe", "rb") as pipe:
            pipe.read(1)
        with open(dump + rank, "wb") as out:
            out.write(b"dump of rank " + rank.encode())
    threading.Thread(target=serve, daemon=True).start()
    def stuck_here():
        print("ready", flush=True)
        time.sleep(60)
    stuck_here()
    """
)


@pytest.fixture
def rank_process(tmp_path):
    env = dict(
        os.environ,
        RANK="5",
        LOCAL_RANK="1",
        TORCHELASTIC_RUN_ID="test",
        TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "pipe_rank"),
        TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_rank"),
    )
    proc = subprocess.Popen([sys.executable, "-c", RANK_PROGRAM], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def run_capture(out_dir, pyspy, budget=10):
    return subprocess.run(
        [sys.executable, "-c", _capture.CAPTURE_SCRIPT, str(out_dir), pyspy, str(budget)],
        capture_output=True,
        text=True,
        timeout=budget + 10,
        check=False,
    )


@pytest.mark.skipif(PYSPY is None, reason="py-spy is in requirements-dev.txt; make venv installs it")
def test_capture_finds_the_rank_takes_its_stack_and_its_flight_recorder_dump(tmp_path, rank_process):
    out = tmp_path / "diagnostics"
    started = time.monotonic()
    proc = run_capture(out, PYSPY)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 10
    record = json.loads((out / "capture.json").read_text())
    entry = record["ranks"]["5"]
    assert entry["pid"] == rank_process.pid and entry["local_rank"] == "1"
    assert entry["py_spy"] == "ok" and entry["flight_recorder"] == "dumped"
    assert (tmp_path / "fr_rank5").read_bytes() == b"dump of rank 5"
    threads = json.loads((out / "rank5.pyspy.json").read_text())
    names = [frame["name"] for thread in threads for frame in thread["frames"]]
    assert "stuck_here" in names


def test_a_dump_written_at_once_over_an_old_one_counts_and_ends_the_wait(tmp_path, rank_process):
    """The rank may answer the poke within a millisecond: the old dump's time is read before it."""
    old = tmp_path / "fr_rank5"
    old.write_bytes(b"an earlier dump")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    proc = run_capture(tmp_path / "out", "", budget=20)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "out" / "capture.json").read_text())
    assert record["ranks"]["5"]["flight_recorder"] == "dumped"
    assert old.read_bytes() == b"dump of rank 5"
    # It stopped waiting once the dump was there, not at the end of its budget.
    assert record["ended_at"] - record["started_at"] < 10


def test_capture_without_py_spy_still_asks_the_flight_recorder_and_says_so(tmp_path, rank_process):
    out = tmp_path / "diagnostics"
    proc = run_capture(out, "")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "capture.json").read_text())
    assert record["py_spy"] == "not on this node"
    assert record["ranks"]["5"]["flight_recorder"] == "dumped"
    assert not list(out.glob("*.pyspy.json"))


def test_capture_says_when_nobody_reads_the_pipe_and_keeps_within_its_budget(tmp_path):
    stem = tmp_path / "pipe_rank"
    os.mkfifo(f"{stem}0.pipe")  # the rank made its pipe but nobody reads it (a dead watchdog)
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", TORCHELASTIC_RUN_ID="t", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(stem))
    child = subprocess.Popen(["sleep", "30"], env=env)
    try:
        started = time.monotonic()
        proc = run_capture(tmp_path / "out", "", budget=2)
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - started < 6
        entry = json.loads((tmp_path / "out" / "capture.json").read_text())["ranks"]["0"]
        assert entry["pid"] == child.pid and "nobody reads it" in entry["flight_recorder"]
    finally:
        child.kill()
        child.wait()


def test_argvs_use_py_spy_only_when_the_node_file_has_the_controllers_hash(tmp_path):
    tool = tmp_path / "py-spy-abc"
    tool.write_bytes(b"binary")
    good = _capture.sha256_file(str(tool))
    argvs, note = _capture.capture_argvs("docker", "c1", "/mnt/out/diagnostics", 25, str(tool), good)
    assert note == "" and argvs[0] == ["docker", "cp", str(tool), f"c1:{_capture.PYSPY_IN_CONTAINER}"]
    assert argvs[1][:6] == ["docker", "exec", "c1", "python3", "-c", _capture.CAPTURE_SCRIPT]
    assert argvs[1][6:] == ["/mnt/out/diagnostics", _capture.PYSPY_IN_CONTAINER, "25"]

    argvs, note = _capture.capture_argvs("docker", "c1", "/d", 25, str(tool), "0" * 64)
    assert len(argvs) == 1 and argvs[0][7] == "" and "sha256 differs" in note
    argvs, note = _capture.capture_argvs("docker", "c1", "/d", 25, str(tmp_path / "gone"), good)
    assert len(argvs) == 1 and "not on this node" in note
    argvs, note = _capture.capture_argvs("docker", "c1", "/d", 25)
    assert len(argvs) == 1 and note == ""
