# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's supervised run as set up in its own process: the process detached from the module run
says once that it started (or why not), and a run without a fabric or a sweep gets no probe."""

from __future__ import annotations

import os
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _supervised


def test_a_detached_process_answers_once_and_outlives_the_module_run(tmp_path):
    log = tmp_path / "supervisor.log"
    marker = tmp_path / "done"

    def work(report):
        report({"pid": os.getpid(), "cwd": os.getcwd(), "session": os.getsid(0)})
        marker.write_text("after the answer")
        return 0

    answer = _supervised.detach(work, str(log))
    # Its own session, in /: a hang-up of the SSH connection does not reach it.
    assert answer["pid"] != os.getpid() and answer["cwd"] == "/" and answer["session"] != os.getsid(0)
    deadline = time.monotonic() + 10  # the process goes on after it answered
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.read_text() == "after the answer"


def test_a_process_that_ends_without_a_word_answers_none_and_leaves_its_traceback_in_the_log(tmp_path):
    log = tmp_path / "supervisor.log"

    def work(report):
        raise RuntimeError("no answer")

    assert _supervised.detach(work, str(log)) is None
    assert "RuntimeError: no answer" in log.read_text()


def test_no_fabric_no_probe_and_no_sweep_no_participant():
    assert _supervised.fabric_probes(None) == (None, None)
    assert _supervised.sweep_participant(None, b"k", "r1") is None
    assert _supervised.sweep_participant({"seconds": 0}, b"k", "r1") is None
