# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One node's supervised run, set up in the process that will supervise it (aorta.cluster.
run_supervisor): the lease taken, the head's aggregator or the worker's link to it, the fabric
sweep's endpoint, the supervisor; the process detached from the module run and the SSH connection.

Private to this collection; standard library only (runs on the nodes). Everything that can refuse
the run does so here, quickly, before the module answers (``Refused``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import traceback

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import (
    _aggregator,
    _fabric,
    _head_link,
    _kernel_log,
    _probe,
    _sweep_net,
    _sweep_phase,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import stop_of
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import (
    Lease,
    LeaseError,
    LeaseHeld,
    boot_id,
    process_start,
    refusal,
    shared_dir,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._supervisor import (
    Supervisor,
    aggregate_path,
    attach_path,
    metrics_progress,
    write_json_atomic,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import (
    HEARTBEAT_S,
    run_lease_s,
)


class Refused(Exception):
    """The supervisor cannot start (the lease is held, the aggregator cannot listen...): nothing runs."""


def write_attach(p, extra):
    """O(attach), with this process's id and the container's start, for a re-attached watch (0600:
    the launch's environment may hold tokens). A failure to write costs only the re-attach."""
    if not p["attach"]:
        return
    record = dict(p["attach"], supervisor_pid=os.getpid(), started=extra.get("started"))
    try:
        write_json_atomic(attach_path(p["directory"], p["run_id"]), record, 0o600)
    except (OSError, TypeError, ValueError):
        return


def detach(work, log_path):
    """Run ``work(report)`` in a process of its own that outlives this module run and the SSH
    connection: forked twice, in a new session, in /, its standard streams on /dev/null and
    ``log_path``. ``work`` calls ``report(dict)`` once it has started (or refused); that dict is
    returned here, or None when the process ended without a word (its traceback is in the log).

    Why not Ansible's async wrapper: it costs a second Python start and a round trip per node. Why
    this is safe after the module's files are gone: every module_utils this process needs is imported
    at the module's top, before the fork (the rest is the node's own standard library)."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        code = 1
        try:
            os.close(read_end)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)  # pylint: disable=protected-access
            os.chdir("/")
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            for fd in (null, log):
                os.close(fd)
            # Python's own streams onto the new descriptors too (a caller may have replaced them):
            # a traceback goes to the log.
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115

            def report(answer):
                os.write(write_end, json.dumps(answer).encode())
                os.close(write_end)

            code = work(report)
        except BaseException:  # pylint: disable=broad-exception-caught
            traceback.print_exc()
        finally:
            os._exit(code)  # pylint: disable=protected-access
    os.close(write_end)
    os.waitpid(first, 0)
    chunks = []
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    try:
        return json.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        return None


def make_watch(spec, run_id, directory):
    """The node's side of the head's aggregator (raises OSError when the head cannot listen,
    SweepToolError when the sweep's tool asked for is not here). The head serves the others after its
    own end for at most a stopping node's bound."""
    secret = bytes.fromhex(spec["secret"])
    sweep = sweep_participant(spec.get("sweep"), secret, run_id)
    if spec["nodes"]:
        judged = spec.get("sweep") or {}
        aggregator = _aggregator.Aggregator(
            run_id,
            secret,
            spec["nodes"],
            spec["heartbeat_timeout"],
            spec["join_timeout"],
            time.monotonic(),
            stopping_timeout=spec["stopping_timeout"],
            sweep={k: judged[k] for k in ("seconds", "threshold", "min_gbps")} if sweep else None,
        )
        # Beside runs/ (the supervisors' status files, logs and kept launches), not in it.
        aggregate = aggregate_path(directory, run_id)
        shared_dir(os.path.dirname(aggregate))
        link = _head_link.HeadLink(aggregator, spec["head_address"], spec["port"], aggregate, write=write_json_atomic)
        stop_path = _aggregator.stop_request_path(aggregate)
        orphan = _aggregator.Orphan(_aggregator.watched_path(aggregate), spec.get("orphan_grace") or 0)
        return _head_link.HeadWatch(link, spec["stopping_timeout"], stop_path=stop_path, orphan=orphan, sweep=sweep)
    link = _head_link.WorkerLink(secret, run_id, spec["node"], spec["head_address"], spec["port"])
    return _head_link.WorkerWatch(link, spec["head"], spec["heartbeat_timeout"], spec["join_timeout"], sweep=sweep)


def sweep_participant(spec, secret, run_id):
    """This node's side of the fabric sweep, None when it is off. A port that cannot be reserved on
    the fabric address leaves the node unmeasured (the others still measure); a tool asked for that
    is not here refuses the launch (SweepToolError)."""
    if not spec or not spec.get("seconds"):
        return None
    tool, why = _sweep_net.choose_tool(spec["tool"])
    try:
        endpoint = _sweep_net.SweepEndpoint(secret, run_id, 0, spec["address"])
    except OSError as exc:
        return _sweep_phase.Participant(None, tool, why, error=f"no port on {spec['address']}: {exc}")
    return _sweep_phase.Participant(endpoint, tool, why, clock=time.monotonic)


def fabric_probes(fabric):
    """With O(fabric): the check of the fabric path when a run does not end well, and the reading of
    its link's error counters at the launch and the end; (None, None) without."""
    if not fabric:
        return None, None

    def check():
        return _fabric.check(
            fabric["interface"],
            fabric["address"],
            fabric["head_address"],
            fabric["head_port"],
            fabric["timeout_seconds"],
        )

    def counters():
        return dict(_fabric.link_facts(fabric["interface"]), interface=fabric["interface"])

    return check, counters


def prepare(p, path, launch, cleanup, diagnose, capture_note):
    """Everything that can refuse the run, quickly, in the process that will supervise it: the lease
    (held by this process, with the run's deadline plus the stop), the head's aggregator, the
    supervisor itself. Returns (supervisor, lease); raises Refused."""
    docker, container = p["docker"], p["container"]
    stopped_campaign = stop_of(p["directory"], p["run_id"])
    if stopped_campaign:  # a stop by the campaign's id came while this group was in its preflight
        raise Refused(stopped_campaign)
    lease = Lease(p["directory"])
    now = time.time()
    # The head serves the others after its own end: its lease holds for that too.
    serving = p["watch"]["stopping_timeout"] if p["watch"] and p["watch"]["nodes"] else 0
    expires = now + run_lease_s(
        p["timeout_seconds"], p["grace_seconds"], p["diagnose_seconds"], len(cleanup), head_stopping_s=serving
    )
    try:
        shared_dir(p["directory"])
        shared_dir(os.path.dirname(path))
        lease.acquire(
            {
                "run_id": p["run_id"],
                "owner": (lease.read() or {}).get("owner", ""),
                "acquired_at": round(now, 3),
                "expires_at": round(expires, 3),
                "grace_s": p["grace_seconds"],
                "holder_pid": os.getpid(),
                "holder_start": process_start(os.getpid()),
                "boot_id": boot_id(),
                "node": os.uname()[1],
                "container": container,
            },
            now,
        )
    except LeaseHeld as held:
        raise Refused(refusal(held)) from None
    except (LeaseError, OSError) as exc:
        raise Refused(f"cannot take the node's lease: {exc}") from None

    def progress():
        return metrics_progress(p["progress_dir"], p["ranks"]) if p["progress_dir"] else {}

    fabric_check, link_counters = fabric_probes(p["fabric"])
    watch = None
    if p["watch"]:
        try:
            watch = make_watch(p["watch"], p["run_id"], p["directory"])
        except _sweep_net.SweepToolError as exc:
            with contextlib.suppress(LeaseError):
                lease.release(p["run_id"])
            raise Refused(f"fabric sweep: {exc}") from None
        except (OSError, ValueError) as exc:
            with contextlib.suppress(LeaseError):
                lease.release(p["run_id"])
            where = "{}:{}/udp".format(p["watch"]["head_address"], p["watch"]["port"])
            raise Refused(f"cannot serve the run's aggregator on {where}: {exc}") from None

    supervisor = Supervisor(
        launch,
        p["timeout_seconds"],
        p["grace_seconds"],
        path,
        term_argv=[docker, "exec", container, "bash", "-c", "kill -TERM -1"],
        kill_argv=[docker, "exec", container, "bash", "-c", "kill -KILL -1"],
        diagnose_argvs=diagnose,
        diagnose_seconds=p["diagnose_seconds"],
        node_scan=_kernel_log.scan if p["kernel_log"] else None,
        fabric_check=fabric_check,
        link_counters=link_counters,
        disk_check=(lambda: _probe.disk_facts(p["progress_dir"])) if p["progress_dir"] else None,
        cleanup_argvs=cleanup,
        log_path=os.path.join(p["directory"], "runs", "{}.exec.log".format(p["run_id"])),
        tail_path=p["log"],
        progress=progress,
        record={"run_id": p["run_id"], "container": container, "ranks": p["ranks"], "capture_note": capture_note},
        watch=watch,
        heartbeat_every=p["watch"]["heartbeat_seconds"] if p["watch"] else HEARTBEAT_S,
    )
    return supervisor, lease


def supervise(supervisor, lease, run_id):
    """The run, to its end; the lease is released however it ends."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, supervisor.request_stop)
    try:
        return supervisor.run()
    finally:
        with contextlib.suppress(LeaseError):
            lease.release(run_id)
