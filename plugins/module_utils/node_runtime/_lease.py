# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One run per node at a time: the node's lease (target side, standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax).

The lease is one JSON file in a node-local directory (never under a shared aorta_path: NFS would
make one lease for every node). Every read-modify-write holds an flock on a lock file beside it,
so two runs acquiring at once cannot both win. A lease is live while its expiry (node wall
clock) is ahead and, once a supervisor holds it, while that very process lives (same boot, same
pid, same start time): a supervisor that died leaves an expired lease at once.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import stop_of

LEASE_FILE = "node.lease"
LOCK_FILE = "node.lock"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


class LeaseHeld(Exception):
    """Another run holds a live lease on this node; ``lease`` is its record."""

    def __init__(self, lease, why):
        super().__init__(why)
        self.lease = lease


class LeaseError(Exception):
    """The lease directory cannot be used, or the run's containers cannot be removed."""


def boot_id(path=BOOT_ID):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def process_start(pid):
    """The start time of ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat), or None
    (also for a zombie: it has ended, only its exit status waits to be read)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as handle:
            data = handle.read()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = data[data.rfind(")") + 2 :].split()
    if fields[:1] == ["Z"]:
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def holder_alive(lease, current_boot=None):
    """True when the lease names a holder process and that very process still runs."""
    pid = lease.get("holder_pid")
    if not pid:
        return False
    if lease.get("boot_id") and lease.get("boot_id") != (current_boot if current_boot is not None else boot_id()):
        return False
    start = process_start(pid)
    return start is not None and start == lease.get("holder_start")


def liveness(lease, now, current_boot=None, gone_owner=None):
    """(live, why) for a lease record read at node wall time ``now``.

    ``gone_owner``: an owner the caller knows has died (its controller process is gone); a lease
    of that owner that no supervisor holds yet is expired.
    """
    expires = float(lease.get("expires_at") or 0)
    if now >= expires:
        return False, f"expired at {_when(expires)}"
    if gone_owner and not lease.get("holder_pid") and lease.get("owner") == gone_owner:
        return False, "its controller process is gone"
    if lease.get("holder_pid"):
        if holder_alive(lease, current_boot):
            return True, "its supervisor (pid {}) runs until {}".format(lease["holder_pid"], _when(expires))
        return False, "its supervisor (pid {}) is gone".format(lease["holder_pid"])
    return True, f"set up until {_when(expires)}"


def _when(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(epoch)))


def describe(lease, why=""):
    """One line naming the run, its owner and when the lease ends."""
    text = "run {} (owner {}, lease until {})".format(
        lease.get("run_id", "?"),
        lease.get("owner") or "unknown",
        _when(lease.get("expires_at") or 0),
    )
    return text + ("; " + why if why else "")


def shared_dir(path):
    """Create ``path`` (and parents) like /tmp: every user may write, each only their own files.

    Users of one cluster may reach a node as different accounts; all must see the same lease.
    """
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o1777)


def refusal(held):
    """The one line a run gets when another run holds the node (``held``: a LeaseHeld)."""
    return (
        f"node {os.uname()[1]} is held by {describe(held.lease, str(held))}: "
        "not launching beside it (wait for it, or stop it)"
    )


class Lease:
    """The lease directory of one node."""

    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, LEASE_FILE)
        self.lock_path = os.path.join(directory, LOCK_FILE)

    def _ensure_dir(self):
        try:
            shared_dir(self.directory)
        except OSError as exc:
            raise LeaseError(f"cannot create the lease directory {self.directory}: {exc.strerror}") from None

    def _locked(self):
        self._ensure_dir()
        try:
            # Read-only is enough for flock, and works on a lock file another user created.
            fd = os.open(self.lock_path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LeaseError(f"cannot open the lease lock {self.lock_path}: {exc.strerror}") from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def read(self):
        """The current lease record, None when there is none; a corrupt file reads as expired."""
        try:
            with open(self.path) as handle:
                data = json.load(handle)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise LeaseError(f"cannot read the lease {self.path}: {exc.strerror}") from None
        except ValueError:
            return {"run_id": "?", "expires_at": 0, "corrupt": True}
        return data if isinstance(data, dict) else {"run_id": "?", "expires_at": 0, "corrupt": True}

    def _write(self, record):
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as handle:
                json.dump(record, handle, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path)
        except OSError as exc:
            # In the sticky directory a user cannot replace another user's lease.
            raise LeaseError(f"cannot write the lease {self.path}: {exc.strerror}") from None

    def acquire(self, record, now=None, current_boot=None, gone_owner=None):
        """Take or renew the lease for ``record['run_id']``.

        Returns ``{"result": "acquired"|"renewed", "previous": <expired lease or None>}``; the
        caller cleans up after an expired previous holder. Raises LeaseHeld for a live lease of
        another run.
        """
        now = time.time() if now is None else now
        fd = self._locked()
        try:
            current = self.read()
            previous = None
            result = "acquired"
            if current is not None:
                if current.get("run_id") == record.get("run_id"):
                    result = "renewed"
                else:
                    live, why = liveness(current, now, current_boot, gone_owner)
                    if live:
                        raise LeaseHeld(current, why)
                    previous = dict(current, why=why)
            self._write(dict(record, boot_id=record.get("boot_id") or boot_id()))
            return {"result": result, "previous": previous}
        finally:
            os.close(fd)

    def release(self, run_id):
        """Remove the lease if ``run_id`` holds it; True when it did."""
        fd = self._locked()
        try:
            current = self.read()
            if current is None or current.get("run_id") != run_id:
                return False
            os.unlink(self.path)
            return True
        finally:
            os.close(fd)


def orphan_containers(run, docker, keep_run):
    """(id, name, run) of every aorta container whose run is not ``keep_run``."""
    rc, out, _err = run(
        [
            docker,
            "ps",
            "-a",
            "--filter",
            "label=aorta.cluster.run",
            "--format",
            '{{.ID}} {{.Names}} {{.Label "aorta.cluster.run"}}',
        ]
    )
    if rc != 0:
        return []
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] != keep_run:
            found.append(tuple(parts))
    return found


def tear_down(run, docker, run_id, node_rank, chown_paths, uid, gid, check_mode=False):
    """Remove this node's containers of run ``run_id`` (labelled with its rank: where nodes share
    an engine, each removes its own), first handing ``chown_paths`` (inside the container) back to
    ``uid``:``gid`` when they are not root's. The backstop of the supervisor's own cleanup.

    Returns {"removed_containers": [names], "chown": None or its rc}; raises LeaseError naming the
    containers when docker cannot remove them."""
    listing = [
        docker,
        "ps",
        "-a",
        "--filter",
        f"label=aorta.cluster.run={run_id}",
        "--filter",
        f"label=aorta.cluster.node_rank={node_rank}",
        "--format",
        "{{.ID}} {{.Names}}",
    ]
    rc, out, _err = run(listing)
    found = [line.split() for line in out.splitlines() if len(line.split()) == 2] if rc == 0 else []
    if not found or check_mode:
        return {"removed_containers": [name for _id, name in found], "chown": None}
    chown_rc = None
    if chown_paths and uid != 0:
        chown_rc, _out, _err = run([docker, "exec", found[0][0], "chown", "-R", f"{uid}:{gid}", *chown_paths])
    rc, _out, err = run([docker, "rm", "-f", "-v"] + [cid for cid, _name in found])
    if rc != 0 and run(listing)[1].strip():  # not a failure when the supervisor removed them meanwhile
        names = ", ".join(name for _id, name in found)
        raise LeaseError(f"cannot remove run {run_id}'s containers {names}: {err.strip()[-300:]}")
    return {"removed_containers": [name for _id, name in found], "chown": chown_rc}


# How long the stop of an abandoned run may take beyond its own grace: the supervisor's SIGKILL
# wait and the container's removal.
ABANDONED_STOP_MARGIN_S = 60


def stop_abandoned(lease, current, gone_owner, clock=time.monotonic, sleep=time.sleep):
    """Stop the supervisor of a run whose controller is known gone, and wait until it let go.

    A controller interrupted (Ctrl-C, SIGKILL) leaves its nodes running to their deadline; nobody
    will collect that run. When the next run comes from the same controller host and the lease's
    owner process is gone (``gone_owner``, judged on the controller), the supervisor is asked to
    stop (SIGTERM: it stops the workload with SIGTERM -> grace -> SIGKILL, removes its container and
    releases the lease). Returns a sentence for the run's output, or "" when there was nothing to stop.
    Raises LeaseHeld when the supervisor cannot be signalled or does not let go in time.
    """
    if not gone_owner or current.get("owner") != gone_owner or not holder_alive(current):
        return ""
    pid = int(current["holder_pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError as exc:  # another account's supervisor: wait for its deadline
        why = f"its controller is gone but its supervisor (pid {pid}) cannot be stopped: {exc.strerror}"
        raise LeaseHeld(current, why) from None
    bound = float(current.get("grace_s") or 30) + ABANDONED_STOP_MARGIN_S
    began = clock()
    while clock() - began < bound:
        now = lease.read()
        if now is None or now.get("run_id") != current.get("run_id") or not holder_alive(now):
            took = clock() - began
            return f"stopped run {current.get('run_id')}, whose controller ({gone_owner}) is gone, in {took:.0f}s"
        sleep(0.5)
    raise LeaseHeld(current, f"its controller is gone and its supervisor (pid {pid}) did not stop within {bound:.0f}s")


def take(directory, run_id, owner, expires_in, run, docker="docker", check_mode=False, now=None, gone_owner=None):
    """Hold this node for ``run_id``: the lease, then the removal of other runs' orphaned containers.

    ``run(argv) -> (rc, out, err)``. Raises LeaseHeld (another run's live lease) or LeaseError.
    Returns ``{"result", "previous", "stopped", "removed_containers", "message"}``; in check mode nothing is
    written, stopped or removed (a live lease of another run still raises). A run whose owner is
    ``gone_owner`` is stopped first (``stop_abandoned``).
    """
    lease = Lease(directory)
    now = time.time() if now is None else now
    stopped_campaign = stop_of(directory, run_id)
    if stopped_campaign:  # aorta.cluster.stop by the campaign's id reached this node first
        raise LeaseError(stopped_campaign)
    current = lease.read()
    other = current if current and current.get("run_id") != run_id else None
    if check_mode:
        if other:
            live, why = liveness(other, now, gone_owner=gone_owner)
            if live:
                raise LeaseHeld(other, why)
        return {"result": "free", "previous": None, "stopped": "", "removed_containers": [], "message": ""}
    stopped = stop_abandoned(lease, other, gone_owner) if other else ""
    if stopped:  # that took a while: the new lease counts from now
        now = time.time()
    record = {
        "run_id": run_id,
        "owner": owner,
        "acquired_at": round(now, 3),
        "expires_at": round(now + expires_in, 3),
        "holder_pid": None,
        "holder_start": None,
        "node": os.uname()[1],
    }
    taken = lease.acquire(record, now, gone_owner=gone_owner)
    prune_status_files(os.path.join(directory, "runs"), now)
    removed = []
    for cid, name, other in orphan_containers(run, docker, run_id):
        rc, _out, err = run([docker, "rm", "-f", "-v", cid])
        if rc != 0:
            raise LeaseError(f"cannot remove {name}, a container of run {other} with no live lease: {err.strip()}")
        removed.append(f"{name} (run {other})")
    parts = [f"lease {taken['result']} for run {run_id}"]
    if stopped:
        parts.append(stopped)
    if taken["previous"]:
        parts.append("took over from " + describe(taken["previous"], taken["previous"].get("why", "")))
    if removed:
        parts.append("removed orphaned containers " + ", ".join(removed))
    return dict(taken, stopped=stopped, removed_containers=removed, message="; ".join(parts))


STATUS_KEEP_S = 14 * 86400


def prune_status_files(directory, now, keep_seconds=STATUS_KEEP_S):
    """Remove supervisors' status files older than two weeks (they are a few KB each)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        try:
            if now - os.stat(path).st_mtime > keep_seconds:
                os.unlink(path)
        except OSError:
            continue
