# SPDX-License-Identifier: GPL-3.0-or-later
"""The supervisor's state machine with real child processes: exit, deadline, a child that ignores
SIGTERM, a stop asked of the supervisor, cleanup, progress and the status file."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils import _supervisor as sv


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def states(status):
    return [e["what"] for e in status["events"]]


def make(tmp_path, argv, timeout=20, grace=2, **kwargs):
    kwargs.setdefault("poll_seconds", 0.05)
    kwargs.setdefault("status_every", 0.1)
    kwargs.setdefault("progress_every", 0.1)
    return sv.Supervisor(
        argv, timeout, grace, str(tmp_path / "status.json"), log_path=str(tmp_path / "out.log"), **kwargs
    )


def test_child_that_exits_gives_its_exit_code_and_the_status_file_says_finished(tmp_path):
    status = make(tmp_path, ["bash", "-c", "echo hello; exit 3"]).run()
    assert status["outcome"] == "failed" and status["rc"] == 3 and not status["timed_out"]
    on_disk = json.loads((tmp_path / "status.json").read_text())
    assert on_disk["state"] == "finished" and on_disk["finished"] is True and on_disk["rc"] == 3
    assert status["log_tail"] == "hello"
    ok = make(tmp_path, ["true"]).run()
    assert ok["outcome"] == "ok" and ok["rc"] == 0


def test_deadline_sends_sigterm_and_a_child_that_handles_it_ends_within_grace(tmp_path):
    marker = tmp_path / "got-term"
    script = f"trap 'touch {marker}; exit 0' TERM; while :; do sleep 0.1; done"
    started = time.monotonic()
    status = make(tmp_path, ["bash", "-c", script], timeout=1, grace=5).run()
    took = time.monotonic() - started
    assert status["outcome"] == "timeout" and status["timed_out"]
    assert marker.exists()
    assert "SIGTERM sent" in states(status) and "SIGKILL sent" not in states(status)
    assert 1 <= took < 5, took


def test_child_that_ignores_sigterm_is_killed_after_grace(tmp_path):
    script = "trap '' TERM; while :; do sleep 0.1; done"
    started = time.monotonic()
    status = make(tmp_path, ["bash", "-c", script], timeout=1, grace=1).run()
    took = time.monotonic() - started
    assert status["outcome"] == "timeout"
    assert states(status).index("SIGTERM sent") < states(status).index("SIGKILL sent")
    assert status["rc"] == -signal.SIGKILL
    assert not alive(status["child_pid"])
    assert 2 <= took < 6, took


def test_diagnostics_run_before_sigterm_and_are_bounded(tmp_path):
    order = tmp_path / "order"
    script = f"trap 'echo term >> {order}; exit 0' TERM; while :; do sleep 0.1; done"
    diagnose = ["bash", "-c", f"echo diag >> {order}; sleep 30"]
    started = time.monotonic()
    status = make(
        tmp_path, ["bash", "-c", script], timeout=0.5, grace=3, diagnose_argv=diagnose, diagnose_seconds=1
    ).run()
    assert time.monotonic() - started < 6
    assert order.read_text().split() == ["diag", "term"]
    assert "diagnostics timed out" in states(status)


def test_signal_argv_replaces_the_process_group_signal(tmp_path):
    """In real use SIGTERM goes inside the container (docker exec ... kill -TERM -1)."""
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; trap 'exit 7' TERM; while :; do sleep 0.1; done"
    term = ["bash", "-c", f"kill -TERM $(cat {pidfile})"]
    status = make(tmp_path, ["bash", "-c", script], timeout=0.5, grace=3, term_argv=term, kill_argv=["true"]).run()
    assert status["outcome"] == "timeout" and status["rc"] == 7


def test_stop_requested_of_the_supervisor_stops_the_workload_as_a_failure(tmp_path):
    supervisor = make(tmp_path, ["sleep", "30"], timeout=60, grace=1)
    threading.Timer(0.5, supervisor.request_stop, args=(signal.SIGTERM,)).start()
    status = supervisor.run()
    assert status["outcome"] == "failed" and not status["timed_out"]
    assert status["reason"] == "stopped by SIGTERM to the supervisor"
    assert not alive(status["child_pid"])


def test_cleanup_runs_after_every_outcome_and_progress_is_read(tmp_path):
    out = tmp_path / "metrics"
    out.mkdir()
    (out / "rank_02_metrics.jsonl").write_text("{}\n{}\n")
    cleaned = tmp_path / "cleaned"
    status = make(
        tmp_path,
        ["bash", "-c", f"sleep 0.3; echo '{{}}' >> {out}/rank_03_metrics.jsonl"],
        cleanup_argvs=[["touch", str(cleaned)]],
        progress=lambda: sv.metrics_progress(str(out), [2, 3, 4]),
    ).run()
    assert cleaned.exists() and status["cleanup"] == [{"cmd": ["touch", str(cleaned)], "rc": 0}]
    assert status["progress"] == {"2": 2, "3": 1, "4": 0}


def test_status_file_is_replaced_while_running(tmp_path):
    supervisor = make(tmp_path, ["sleep", "1.5"], timeout=30)
    seen = []

    def watch():
        for _poll in range(20):
            path = tmp_path / "status.json"
            if path.exists():
                seen.append(json.loads(path.read_text())["state"])  # never a partial file
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    status = supervisor.run()
    watcher.join()
    assert "running" in seen and status["state"] == "finished"
    assert status["left_s"] <= 30 and status["deadline_at"] > status["started_at"]


def test_a_command_that_cannot_start_is_a_failure_not_a_crash(tmp_path):
    status = make(tmp_path, ["/nonexistent/launch"]).run()
    assert status["outcome"] == "failed" and status["rc"] == 127


@pytest.mark.parametrize("lines", [1, 3])
def test_read_tail_keeps_the_last_lines(tmp_path, lines):
    path = tmp_path / "log"
    path.write_text("a\nb\nc\n")
    assert sv.read_tail(str(path), lines) == "\n".join(["a", "b", "c"][-lines:])
    assert sv.read_tail(str(tmp_path / "missing")) == ""


def test_run_bounded_kills_a_command_past_its_bound():
    started = time.monotonic()
    assert sv.run_bounded(["sleep", "30"], 0.5) is None
    assert time.monotonic() - started < 5
    assert sv.run_bounded(["false"], 5) == 1
