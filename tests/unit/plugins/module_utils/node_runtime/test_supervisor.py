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

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _supervisor as sv


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


def test_the_fabric_links_error_counters_are_read_at_the_launch_and_the_end_with_what_grew(tmp_path):
    reads = iter(
        [{"interface": "eth1", "rx_errors": 5, "tx_errors": 0}, {"interface": "eth1", "rx_errors": 9, "tx_errors": 0}]
    )
    status = make(tmp_path, ["true"], link_counters=lambda: next(reads)).run()
    assert status["link"] == {
        "interface": "eth1",
        "start": {"rx_errors": 5, "tx_errors": 0},
        "end": {"rx_errors": 9, "tx_errors": 0},
        "grew": {"rx_errors": 4},
    }
    # Counters that cannot be read say so and decide nothing.
    broken = make(tmp_path, ["true"], link_counters=lambda: 1 / 0).run()
    assert broken["outcome"] == "ok" and broken["link"]["error"].startswith("link counters unreadable")


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


def test_diagnostics_run_before_sigterm_within_one_budget_for_all_steps(tmp_path):
    order = tmp_path / "order"
    script = f"trap 'echo term >> {order}; exit 0' TERM; while :; do sleep 0.1; done"
    steps = [["bash", "-c", f"echo one >> {order}; sleep 0.6"], ["bash", "-c", f"echo two >> {order}; sleep 30"]]
    steps.append(["bash", "-c", f"echo three >> {order}"])
    started = time.monotonic()
    status = make(
        tmp_path, ["bash", "-c", script], timeout=0.5, grace=3, diagnose_argvs=steps, diagnose_seconds=1.5
    ).run()
    assert time.monotonic() - started < 6
    # The second step gets what the first left (about 0.9 s) and times out; the third gets none.
    assert order.read_text().split() == ["one", "two", "term"]
    assert "diagnostics: bash -c timed out" in states(status)
    assert any(e.startswith("diagnostics: no time left") for e in states(status))
    assert 1.4 <= status["capture_s"] < 2.5, status["capture_s"]


def test_diagnostics_do_not_run_when_the_workload_ends_by_itself(tmp_path):
    marker = tmp_path / "diagnosed"
    status = make(tmp_path, ["true"], diagnose_argvs=[["touch", str(marker)]]).run()
    assert status["outcome"] == "ok" and not marker.exists() and "capture_s" not in status


def test_node_scan_covers_the_run_window_after_every_outcome_and_never_decides_it(tmp_path):
    windows = []

    def scan(start, end):
        windows.append((start, end))
        return {"source": "test", "error": "", "lines": [{"at": end, "kind": "xgmi", "line": "xgmi link down"}]}

    before = time.time()
    status = make(tmp_path, ["bash", "-c", "exit 2"], node_scan=scan).run()
    assert status["outcome"] == "failed" and status["node_errors"]["lines"][0]["kind"] == "xgmi"
    ((start, end),) = windows
    assert before - 1 <= start <= end <= time.time() + 1

    def broken(_start, _end):
        raise RuntimeError("no journal")

    status = make(tmp_path, ["true"], node_scan=broken).run()
    assert status["outcome"] == "ok" and "no journal" in status["node_errors"]["error"]


def test_fabric_is_checked_before_sigterm_and_on_failure_never_on_success(tmp_path):
    calls = []
    marker = tmp_path / "got-term"

    def check():
        calls.append(marker.exists())  # the workload must still be running when it is asked
        return {"ok": False, "link_up": False, "interface": "eth1"}

    script = f"trap 'touch {marker}; exit 0' TERM; while :; do sleep 0.1; done"
    status = make(tmp_path, ["bash", "-c", script], timeout=1, fabric_check=check).run()
    assert status["outcome"] == "timeout" and status["fabric"]["link_up"] is False and calls == [False]
    assert states(status).index("fabric check: trouble") < states(status).index("SIGTERM sent")
    status = make(tmp_path, ["bash", "-c", "exit 4"], fabric_check=check).run()
    assert status["outcome"] == "failed" and "fabric" in status and len(calls) == 2
    status = make(tmp_path, ["true"], fabric_check=check).run()
    assert status["outcome"] == "ok" and "fabric" not in status and len(calls) == 2

    def broken():
        raise OSError("no sysfs")

    status = make(tmp_path, ["bash", "-c", "exit 4"], fabric_check=broken).run()
    assert status["fabric"]["ok"] is None and "no sysfs" in status["fabric"]["error"]
    assert "fabric check: unknown" in states(status)


def test_disk_keeps_the_lowest_free_space_seen_while_the_workload_ran(tmp_path):
    # The workload ends only once the disk was read twice: no timing decides what the test sees.
    read_twice = tmp_path / "read-twice"
    free = iter([500, 100])

    def disk():
        value = next(free, 900)
        if value == 100:
            read_twice.touch()
        return {"path": "/out", "free_bytes": value, "total_bytes": 1000, "error": ""}

    script = f"while [ ! -e {read_twice} ]; do sleep 0.02; done"
    status = make(tmp_path, ["bash", "-c", script], disk_check=disk).run()
    assert status["outcome"] == "ok"
    assert status["disk"]["lowest_free_bytes"] == 100 and status["disk"]["free_bytes"] == 900


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


class ScriptedWatch:
    """The head's side as a supervisor sees it, scripted: a join answer, then a stop on beat N."""

    role = "worker"

    def __init__(self, join="", stop_on_beat=None):
        self.join_answer, self.stop_on_beat = join, stop_on_beat
        self.bodies, self.final = [], None

    def join(self):
        return self.join_answer

    def beat(self, body):
        self.bodies.append(body)
        if self.stop_on_beat and len(self.bodies) >= self.stop_on_beat:
            return {"node": "w2", "reason": "no heartbeat from w2 for 30 s", "by": "head"}
        return None

    def finish(self, body):
        self.final = body

    def waiting(self):
        return False

    def silent(self):
        return {}

    def close(self):
        self.closed = True


def test_the_heads_stop_captures_then_stops_the_workload_as_failed_naming_the_node(tmp_path):
    marker, captured = tmp_path / "got-term", tmp_path / "captured"
    script = f"trap 'touch {marker}; exit 0' TERM; while :; do sleep 0.1; done"
    watch = ScriptedWatch(stop_on_beat=2)
    status = make(
        tmp_path,
        ["bash", "-c", script],
        timeout=60,
        grace=3,
        watch=watch,
        heartbeat_every=0.1,
        diagnose_argvs=[["touch", str(captured)]],
    ).run()
    assert status["outcome"] == "failed" and not status["timed_out"] and status["watch"] == "worker"
    assert status["cluster_stop"] == {"node": "w2", "reason": "no heartbeat from w2 for 30 s", "by": "head"}
    what = states(status)
    assert what.index("joined the head's aggregator") < what.index("launched")
    assert what.index("stopped by the head: no heartbeat from w2 for 30 s") < what.index("SIGTERM sent")
    assert captured.exists() and marker.exists()  # the capture ran, then SIGTERM
    # The head heard the node say it was stopping (so its silence is not judged), then its end.
    assert [b["state"] for b in watch.bodies][-1] == "diagnosing"
    assert watch.final["finished"] is True and watch.final["outcome"] == "failed"


class StoppedWatch(ScriptedWatch):
    """The controller's stop already in force at the head when this node's workload ends."""

    def beat(self, body):
        self.bodies.append(body)
        return {"node": "controller", "kind": "stopped", "reason": "interrupted on the controller", "by": "head"}


def test_a_workload_that_fails_after_the_users_stop_reached_a_peer_is_recorded_as_stopped(tmp_path):
    # Its ranks end when a peer's stop closes their collective, before this node's next report: the
    # head, asked once at the exit, says the run was stopped, and the record names that, not "exit code 1".
    status = make(tmp_path, ["bash", "-c", "exit 1"], watch=StoppedWatch(), heartbeat_every=60).run()
    assert status["outcome"] == "failed" and status["rc"] == 1
    assert status["reason"] == (
        "stopped from the controller: interrupted on the controller (the workload had ended with exit code 1)"
    )
    assert status["cluster_stop"]["kind"] == "stopped"
    # A failure of its own, with no stop at the head, keeps its exit code as the reason.
    plain = make(tmp_path, ["bash", "-c", "exit 1"], watch=ScriptedWatch(), heartbeat_every=60).run()
    assert plain["reason"] == "exit code 1" and "cluster_stop" not in plain


def test_a_node_the_head_refuses_launches_nothing(tmp_path):
    marker = tmp_path / "ran"
    refusal = "fabric: the head h's aggregator at 10.0.0.1:29500/udp did not answer in 120 s"
    status = make(tmp_path, ["touch", str(marker)], watch=ScriptedWatch(join=refusal)).run()
    assert status["outcome"] == "failed" and status["reason"] == refusal and status["child_pid"] is None
    assert not marker.exists() and "launched" not in states(status)


class SweptWatch(ScriptedWatch):
    """A join that ran the fabric sweep: its record, as the watch keeps it."""

    def __init__(self, record, join=""):
        super().__init__(join=join)
        self.record = record

    def sweep_record(self):
        return self.record


def test_the_sweep_the_join_ran_is_in_the_status_and_its_events_before_the_launch(tmp_path):
    record = {"tool": "tcp", "rounds": [], "send_gbps": 0.19, "recv_gbps": 3.7, "ratio": 0.05, "slow": True}
    status = make(tmp_path, ["true"], watch=SweptWatch(record), heartbeat_every=60).run()
    assert status["fabric_sweep"] == record and status["outcome"] == "ok"
    what = states(status)
    line = "fabric sweep (tcp): sent 0.19, received 3.7 Gbit/s at best (0.05x its rounds' median); slow"
    assert what.index(line) < what.index("launched")
    # A node the head stopped after the sweep keeps its figures too; a watch without a sweep adds nothing.
    stopped = make(
        tmp_path, ["true"], watch=SweptWatch(record, join="the run stopped before its ranks started: x")
    ).run()
    assert stopped["fabric_sweep"] == record and stopped["outcome"] == "failed"
    assert "fabric_sweep" not in make(tmp_path, ["true"], watch=ScriptedWatch(), heartbeat_every=60).run()


class BrokenJoinWatch(ScriptedWatch):
    def join(self):
        raise RuntimeError("can't start new thread")


class FabricStopWatch(ScriptedWatch):
    def __init__(self):
        super().__init__(join="the head stopped the run before this node launched: fabric sweep: w2 ...")
        self.join_stop = {"node": "w2", "kind": "fabric", "reason": "fabric sweep: w2 at 0.2 Gbit/s", "by": "head"}


def test_a_join_that_raises_launches_nothing_and_says_why(tmp_path):
    marker = tmp_path / "ran"
    status = make(tmp_path, ["touch", str(marker)], watch=BrokenJoinWatch()).run()
    assert status["outcome"] == "failed" and not marker.exists()
    assert status["reason"] == "could not join the head's aggregator: can't start new thread"


def test_the_sweeps_stop_is_the_nodes_cluster_stop_naming_the_slow_node(tmp_path):
    status = make(tmp_path, ["true"], watch=FabricStopWatch()).run()
    assert status["outcome"] == "failed" and status["cluster_stop"]["node"] == "w2"
    assert status["cluster_stop"]["kind"] == "fabric" and "launched" not in states(status)
