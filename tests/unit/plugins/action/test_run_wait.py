# SPDX-License-Identifier: GPL-3.0-or-later
"""The waiter's one remote command per poll, run by a real shell on a real status file."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from ansible_collections.aorta.cluster.plugins.action.run_wait import long_poll_command


def run(command):
    started = time.monotonic()
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return out, time.monotonic() - started


def test_returns_at_once_when_finished(tmp_path):
    path = tmp_path / "it's status.json"  # a quote in the path must not break the command
    path.write_text(json.dumps({"finished": True, "state": "finished"}, sort_keys=True))
    out, took = run(long_poll_command(str(path), 10))
    assert out.returncode == 0 and json.loads(out.stdout)["state"] == "finished"
    assert took < 2


def test_waits_up_to_the_poll_and_returns_early_when_the_run_finishes(tmp_path):
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"finished": False, "state": "running"}, sort_keys=True))
    out, took = run(long_poll_command(str(path), 2))
    assert json.loads(out.stdout)["state"] == "running" and 1.5 < took < 5

    def finish():
        time.sleep(1)
        path.write_text(json.dumps({"finished": True, "state": "finished"}, sort_keys=True))

    threading.Thread(target=finish).start()
    out, took = run(long_poll_command(str(path), 30))
    assert json.loads(out.stdout)["state"] == "finished" and took < 5


def test_missing_file_fails_the_read(tmp_path):
    out, _took = run(long_poll_command(str(tmp_path / "none.json"), 1))
    assert out.returncode != 0 and out.stdout == ""
