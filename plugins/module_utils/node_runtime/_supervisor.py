# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run supervisor's state machine (target side, standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax), in the process of its own
that run_supervisor detaches once per node, so that the deadline and SIGTERM -> grace -> SIGKILL hold even
when the controller is gone: the node keeps its own time (monotonic clock), stops its own
workload and removes its own container.

States written to the status file, in order: ``running`` -> (``diagnosing`` -> ``terminating``
-> ``killing``) -> ``cleaning`` -> ``finished``. The file is replaced atomically, so a reader
never sees half a record.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._fabric import (
    LINK_COUNTERS as LINK_ERROR_COUNTERS,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import (
    CLEANUP_COMMAND_S,
    DIAGNOSE_S,
    HEARTBEAT_S,
    KILL_GROUP_WAIT_S,
    KILL_WAIT_S,
    REAP_AFTER_KILL_S,
    SIGNAL_COMMAND_S,
)

TAIL_BYTES = 256 * 1024
# Every wait of the supervisor's own is named in module_utils/node_runtime/_time_bounds.py, where its stop bound
# (stop_bound_s) and every controller bound around it are derived from them.


def spawn(argv, output_path=None):
    """Start ``argv`` in a session of its own, output appended to ``output_path``; returns its pid.

    posix_spawn rather than a shell: the argv reaches the program as it is. And rather than
    fork(): the head's supervisor has the aggregator's thread running, and a fork of a threaded
    process may deadlock in the child before its exec.
    """
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, output_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    args = [str(a) for a in argv]
    # Not AnsibleModule.run_command: the child must outlive this call in a session of its own.
    return os.posix_spawnp(args[0], args, os.environ, file_actions=actions, setsid=True)  # pylint: disable=ansible-bad-function


def reap(pid):
    """The exit code of ``pid`` if it has ended (a signal N gives -N), else None."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    if done == 0:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def kill_group(pid, sig):
    """Signal the session ``spawn`` made for ``pid``; quiet when it is already gone."""
    try:
        os.killpg(pid, sig)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise


def wait_for_exit(pid, seconds, clock=time.monotonic, sleep=time.sleep, step=0.1):
    """Reap ``pid`` within ``seconds``; its exit code, or None if it still runs."""
    end = clock() + seconds
    while True:
        rc = reap(pid)
        if rc is not None or clock() >= end:
            return rc
        sleep(step)


def run_bounded(argv, seconds, output_path=None, clock=time.monotonic, sleep=time.sleep):
    """Run ``argv`` for at most ``seconds``; its exit code, or None when it had to be killed."""
    try:
        pid = spawn(argv, output_path)
    except OSError:
        return 127
    rc = wait_for_exit(pid, seconds, clock, sleep)
    if rc is None:
        kill_group(pid, signal.SIGKILL)
        wait_for_exit(pid, REAP_AFTER_KILL_S, clock, sleep)
    return rc


def status_path(directory, run_id):
    """The supervisor's status file of ``run_id`` in the node's lease ``directory``."""
    return os.path.join(directory, "runs", f"{run_id}.json")


def attach_path(directory, run_id):
    """What the launch kept there for a watch re-attached to ``run_id`` (run_supervisor's O(attach))."""
    return os.path.join(directory, "runs", f"{run_id}.attach.json")


def aggregate_path(directory, run_id):
    """The head's aggregate of ``run_id``: beside runs/, where only the head's supervisor writes."""
    return os.path.join(directory, "aggregates", f"{run_id}.json")


def write_json_atomic(path, record, mode=None):
    """Replace ``path`` with ``record`` so that a reader sees the old or the new file, never half;
    with ``mode``, the file has it from its first byte."""
    write_text_atomic(path, json.dumps(record, sort_keys=True), mode)


def read_tail(path, lines=300):
    """The last ``lines`` lines of a text file ('' when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


_METRICS = re.compile(r"^rank_(\d+)_metrics\.jsonl$")


def metrics_progress(directory, ranks=()):
    """Steps per global rank: the lines of each ``rank_<rr>_metrics.jsonl`` (one per step).

    A rank of ``ranks`` without a file has recorded 0 steps.
    """
    progress = {str(int(r)): 0 for r in ranks}
    try:
        names = os.listdir(directory)
    except OSError:
        return progress
    for name in names:
        match = _METRICS.match(name)
        if not match:
            continue
        rank = str(int(match.group(1)))
        if ranks and rank not in progress:
            continue
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                progress[rank] = sum(chunk.count(b"\n") for chunk in iter(lambda h=handle: h.read(1 << 20), b""))
        except OSError:
            pass
    return progress


class Supervisor:
    """Run one node's launch command under its deadline, then stop and clean up after it.

    launch_argv: the command whose exit is the node's outcome (``docker exec <c> bash launch.sh``).
    term_argv / kill_argv: how to send SIGTERM / SIGKILL to the workload (inside the container);
    None signals the launch command's own process group instead.
    diagnose_argvs: run in order at the deadline before SIGTERM, for at most ``diagnose_seconds``
    in all (what is left of the budget bounds each one).
    node_scan: a callable ``(start_epoch, end_epoch) -> dict`` run after every outcome (the node's
    kernel log); its answer is the status's ``node_errors``.
    fabric_check: a callable ``() -> dict`` asked when the run did not end well, before anything is
    stopped (at the deadline, or as soon as the launch fails): the status's ``fabric``.
    disk_check: a callable ``() -> dict`` (``_probe.disk_facts`` of the output directory) asked with
    every progress read and at the end: the status's ``disk`` keeps its lowest ``free_bytes``, since
    a profiler that meets a full disk may still exit 0 with its trace lost.
    cleanup_argvs: run in order once the workload has ended, whatever the outcome.
    log_path: where the launch command's output goes; tail_path: the log whose tail is kept.
    progress: a callable returning ``{rank: steps}``, read every ``progress_every`` seconds.
    watch: the node's side of the head's aggregator (``_head_link.HeadWatch`` or ``WorkerWatch``):
    ``join()`` before the launch ('' or why this node must not launch), ``beat(body)`` every
    ``heartbeat_every`` seconds (None, or the stop the head ordered or the node decided on its own),
    ``finish(body)`` at the end, then ``waiting()`` while the head serves the others (``silent()``:
    the nodes it counts as gone, the status's ``silent_nodes``), then ``close()``. A stop is the
    deadline's path (capture, SIGTERM, grace, SIGKILL) with the outcome ``failed`` and the status's
    ``cluster_stop`` naming the node it is about.
    """

    def __init__(
        self,
        launch_argv,
        timeout_seconds,
        grace_seconds,
        status_path,
        term_argv=None,
        kill_argv=None,
        diagnose_argvs=(),
        diagnose_seconds=DIAGNOSE_S,
        node_scan=None,
        fabric_check=None,
        disk_check=None,
        link_counters=None,
        cleanup_argvs=(),
        log_path=None,
        tail_path=None,
        progress=None,
        record=None,
        watch=None,
        heartbeat_every=HEARTBEAT_S,
        poll_seconds=0.5,
        status_every=2.0,
        progress_every=5.0,
        clock=time.monotonic,
        wall=time.time,
        sleep=time.sleep,
    ):
        self.launch_argv = list(launch_argv)
        self.timeout = float(timeout_seconds)
        self.grace = float(grace_seconds)
        self.status_path = status_path
        self.term_argv = term_argv
        self.kill_argv = kill_argv
        self.diagnose_argvs = [list(a) for a in diagnose_argvs or ()]
        self.node_scan = node_scan
        self.fabric_check = fabric_check
        self.disk_check = disk_check
        self.link_counters = link_counters
        self.diagnose_seconds = float(diagnose_seconds)
        self.cleanup_argvs = [list(a) for a in cleanup_argvs]
        self.log_path = log_path
        self.tail_paths = [t for t in (tail_path, log_path) if t]
        self.progress = progress
        self.watch = watch
        self.heartbeat_every = float(heartbeat_every)
        self.cluster_stop = None
        self.poll = float(poll_seconds)
        self.status_every = float(status_every)
        self.progress_every = float(progress_every)
        self.clock, self.wall, self.sleep = clock, wall, sleep
        self.stop_requested = None
        self.status = dict(record or {})
        self.status.update(
            {
                "state": "starting",
                "finished": False,
                "outcome": None,
                "rc": None,
                "timed_out": False,
                "reason": "",
                "supervisor_pid": os.getpid(),
                "child_pid": None,
                "progress": {},
                "events": [],
            }
        )
        self._started = None

    # Signals to the supervisor itself (a node shutting down, an operator's kill): stop the
    # workload the same way as at the deadline instead of leaving it behind.
    def request_stop(self, signum, _frame=None):
        self.stop_requested = signal.Signals(signum).name

    def _elapsed(self):
        return self.clock() - self._started

    def _event(self, what):
        self.status["events"].append(
            {"at": round(self.wall(), 3), "elapsed_s": round(self._elapsed(), 3), "what": what}
        )

    def _write(self, state=None):
        if state:
            self.status["state"] = state
        elapsed = self._elapsed()
        self.status["elapsed_s"] = round(elapsed, 3)
        self.status["left_s"] = round(max(0.0, self.timeout - elapsed), 3)
        self.status["updated_at"] = round(self.wall(), 3)
        write_json_atomic(self.status_path, self.status)

    def _read_progress(self):
        if self.progress is not None:
            try:
                self.status["progress"] = self.progress()
            except Exception as exc:
                self.status["progress_error"] = str(exc)
        self._read_disk()

    def _read_disk(self):
        if self.disk_check is None:
            return
        try:
            now = self.disk_check()
        except Exception as exc:  # informs; never decides the outcome here
            self.status["disk"] = {"error": f"disk check failed: {exc}"}
            return
        seen = self.status.get("disk") or {}
        lowest = [v for v in (seen.get("lowest_free_bytes"), now.get("free_bytes")) if v is not None]
        self.status["disk"] = dict(now, lowest_free_bytes=min(lowest) if lowest else None)

    def run(self):
        """Supervise to the end; returns the final status record (also in the status file)."""
        self._started = self.clock()
        now_wall = self.wall()
        self.status["started_at"] = round(now_wall, 3)
        self.status["deadline_at"] = round(now_wall + self.timeout, 3)
        self.status["timeout_s"] = self.timeout
        self.status["grace_s"] = self.grace
        if self.watch is not None:
            self.status["watch"] = self.watch.role
            self._write("joining")
            refused = self._call_watch("join")
            if refused is None and str(self.status.get("watch_error", "")).startswith("join:"):
                refused = "could not join the head's aggregator: " + self.status["watch_error"].removeprefix("join: ")
            self._record_sweep()
            stop = getattr(self.watch, "join_stop", None)
            if isinstance(stop, dict) and stop.get("kind") == "fabric":
                self.status["cluster_stop"] = stop  # the node the sweep stopped the run for
            if refused:
                self._event(refused)
                if refused.startswith("fabric"):
                    self._check_fabric()
                return self._finish(None, "failed", refused)
            self._event("joined the head's aggregator")
        self._read_link("start")
        try:
            pid = spawn(self.launch_argv, self.log_path)
        except OSError as exc:  # the shell's codes: 126 found but not runnable, 127 not found
            rc = 126 if exc.errno == errno.EACCES else 127
            return self._finish(rc, "failed", f"cannot start {self.launch_argv[0]}: {exc}")
        self.status["child_pid"] = pid
        self._event("launched")
        self._write("running")
        last_status = last_progress = last_beat = self.clock()
        while True:
            rc = reap(pid)
            if rc is not None:
                self._event(f"exited {rc}")
                if rc == 0:
                    return self._finish(rc, "ok", "")
                self._check_fabric()
                return self._finish(rc, "failed", self._exit_reason(rc))
            if self.stop_requested or self._elapsed() >= self.timeout:
                return self._stop(pid)
            now = self.clock()
            if now - last_progress >= self.progress_every:
                self._read_progress()
                last_progress = now
            if now - last_status >= self.status_every:
                self._write()
                last_status = now
            if self.watch is not None and now - last_beat >= self.heartbeat_every:
                last_beat = now
                self.cluster_stop = self._call_watch("beat", self._body())
                if self.cluster_stop:
                    self.status["cluster_stop"] = self.cluster_stop
                    return self._stop(pid)
            self.sleep(self.poll)

    def _record_sweep(self):
        """The fabric sweep the join ran (the watch's ``sweep_record``): this node's figures, the
        head's judgement of them, and on the head the cluster's."""
        read = getattr(self.watch, "sweep_record", None)
        sweep = self._call_watch("sweep_record") if read is not None else None
        if not sweep:
            return
        self.status["fabric_sweep"] = sweep
        best = [f"{sweep[k]:g}" if isinstance(sweep.get(k), (int, float)) else "-" for k in ("send_gbps", "recv_gbps")]
        ratio = sweep.get("ratio")
        self._event(
            f"fabric sweep ({sweep.get('tool')}): sent {best[0]}, received {best[1]} Gbit/s at best"
            + (f" ({ratio:g}x its rounds' median)" if isinstance(ratio, (int, float)) else "")
            + ("; slow" if sweep.get("slow") else "")
        )

    def _exit_reason(self, rc):
        """Why the workload ended non-zero. A user's stop can reach a peer first: its ranks end, and
        this node's, waiting in a collective with them, fail before this node's next report. The head
        is asked once, so the node's record names the stop rather than the exit it caused."""
        reason = f"exit code {rc}"
        if self.watch is None:
            return reason
        stop = self._call_watch("beat", self._body())
        if not stop or stop.get("kind") != "stopped":
            return reason
        self.status["cluster_stop"] = stop
        return f"stopped from the controller: {stop.get('reason')} (the workload had ended with {reason})"

    def _stop(self, pid):
        stop = self.cluster_stop
        if stop and stop.get("kind") == "stopped":
            reason = f"stopped from the controller: {stop.get('reason')}"
        elif stop:
            who = "the head" if stop.get("by") == "head" else "this node"
            reason = f"stopped by {who}: {stop.get('reason')}"
        elif self.stop_requested:
            reason = f"stopped by {self.stop_requested} to the supervisor"
        else:
            reason = f"deadline of {self.timeout:g}s reached"
        timed_out = not self.stop_requested and not stop
        self.status["timed_out"] = timed_out
        self._event(reason)
        self._read_progress()  # how far each rank got is the evidence of who everyone waited for
        # The head's stop captures as the deadline does; a stop the user asked for does not wait for it.
        capture = timed_out or (bool(stop) and stop.get("kind") != "stopped")
        if capture:
            self._check_fabric()  # while the head still listens: a cut link is told from a closed port
        if self.watch is not None:  # the head must not take this node's stop for a silence
            self.status["state"] = "diagnosing"
            self._call_watch("beat", self._body())
        if self.diagnose_argvs and capture:
            self._diagnose()
        self._write("terminating")
        self._signal(pid, self.term_argv, signal.SIGTERM)
        self._event("SIGTERM sent")
        rc = wait_for_exit(pid, self.grace, self.clock, self.sleep)
        if rc is None:
            self._write("killing")
            self._signal(pid, self.kill_argv, signal.SIGKILL)
            self._event("SIGKILL sent")
            rc = wait_for_exit(pid, KILL_WAIT_S, self.clock, self.sleep)
            if rc is None:  # the launch command itself hangs (a stuck docker exec): end it here
                kill_group(pid, signal.SIGKILL)
                rc = wait_for_exit(pid, KILL_GROUP_WAIT_S, self.clock, self.sleep)
        self._event("workload ended" if rc is not None else "workload did not end")
        return self._finish(rc, "timeout" if timed_out else "failed", reason)

    def _body(self, finished=False):
        """What this node tells the head: a few hundred bytes."""
        return {
            "state": self.status["state"],
            "finished": finished,
            "outcome": self.status["outcome"],
            "rc": self.status["rc"],
            "reason": self.status["reason"][:300],
            "progress": self.status["progress"],
            "disk_free": (self.status.get("disk") or {}).get("free_bytes"),
        }

    def _see_the_others_out(self):
        """The final report; on the head, serving the others until they have ended or gone silent
        (the status meanwhile names the silent ones: the controller reads it)."""
        self._call_watch("finish", self._body(finished=True))
        while self._call_watch("waiting"):
            silent = self._call_watch("silent")
            if silent and silent != self.status.get("silent_nodes"):
                self.status["silent_nodes"] = silent
                self._write()
            self.sleep(0.5)
        silent = self._call_watch("silent")
        if silent:
            self.status["silent_nodes"] = silent
        self._call_watch("close")

    def _call_watch(self, what, *args):
        """The watch's answer; a fault in it is recorded, never the end of the supervision."""
        try:
            return getattr(self.watch, what)(*args)
        except Exception as exc:
            self.status["watch_error"] = f"{what}: {exc}"
            return None

    def _check_fabric(self):
        if self.fabric_check is None:
            return
        try:
            self.status["fabric"] = self.fabric_check()
        except Exception as exc:  # the check informs; it never decides the outcome
            self.status["fabric"] = {"ok": None, "error": f"fabric check failed: {exc}"}
        self._event("fabric check: " + {True: "ok", False: "trouble"}.get(self.status["fabric"].get("ok"), "unknown"))

    def _diagnose(self):
        """The capture at the deadline: every step within what is left of one budget."""
        self._write("diagnosing")
        began = self.clock()
        for argv in self.diagnose_argvs:
            left = self.diagnose_seconds - (self.clock() - began)
            if left <= 0:
                self._event(f"diagnostics: no time left for {argv[0]} {argv[1] if len(argv) > 1 else ''}".rstrip())
                break
            rc = run_bounded(argv, left, clock=self.clock, sleep=self.sleep)
            self._event(f"diagnostics: {' '.join(argv[:2])} " + ("timed out" if rc is None else f"exit {rc}"))
        self.status["capture_s"] = round(self.clock() - began, 3)

    def _signal(self, pid, argv, sig):
        if argv:
            if run_bounded(argv, SIGNAL_COMMAND_S, clock=self.clock, sleep=self.sleep) is None:
                self._event(f"{argv[0]} did not return")
        else:
            kill_group(pid, sig)

    def _read_link(self, when):
        """The fabric link's error counters at the launch and at the end, and what grew between: a
        dirty cable or a failing port makes errors (drops are left out: healthy NICs drop)."""
        if self.link_counters is None or (when == "end" and "link" not in self.status):
            return  # nothing launched: nothing to compare
        try:
            now = self.link_counters()
        except Exception as exc:  # the counters inform; they never decide the outcome
            self.status["link"] = {"error": f"link counters unreadable: {exc}"}
            return
        link = self.status.setdefault("link", {"interface": now.get("interface")})
        link[when] = {k: now.get(k) for k in LINK_ERROR_COUNTERS}
        if when == "end" and isinstance(link.get("start"), dict):
            start, end = link["start"], link["end"]
            link["grew"] = {
                k: end[k] - start[k]
                for k in LINK_ERROR_COUNTERS
                if isinstance(start.get(k), int) and isinstance(end.get(k), int) and end[k] > start[k]
            }

    def _finish(self, rc, outcome, reason):
        self.status.update({"rc": rc, "outcome": outcome, "reason": reason})
        self._read_link("end")
        self._read_progress()
        self._write("cleaning")
        for path in self.tail_paths:  # the node's own log first; the launch command's output else
            self.status["log_tail"] = read_tail(path)
            if self.status["log_tail"]:
                break
        cleanup = []
        for argv in self.cleanup_argvs:
            rc = run_bounded(argv, CLEANUP_COMMAND_S, clock=self.clock, sleep=self.sleep)
            cleanup.append({"cmd": argv[:3], "rc": rc})
        self.status["cleanup"] = cleanup
        self.status["ended_at"] = round(self.wall(), 3)
        if self.node_scan is not None:
            try:
                self.status["node_errors"] = self.node_scan(self.status["started_at"], self.status["ended_at"])
            except Exception as exc:  # the scan informs; it never decides the outcome
                self.status["node_errors"] = {"source": None, "error": f"kernel log scan failed: {exc}", "lines": []}
        if self.watch is not None:
            self._see_the_others_out()
        self.status["finished"] = True
        self._event("finished")
        self._write("finished")
        return self.status
