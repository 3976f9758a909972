# SPDX-License-Identifier: GPL-3.0-or-later
"""The node lease: one run at a time, expiry by time or by a dead supervisor, races under flock."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _lease as lease_mod
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import mark_stop
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import Lease, LeaseError, LeaseHeld


def record(run_id, expires_in=600, pid=None, now=None):
    now = time.time() if now is None else now
    return {
        "run_id": run_id,
        "owner": f"me@ctl ({run_id})",
        "acquired_at": now,
        "expires_at": now + expires_in,
        "holder_pid": pid,
        "holder_start": lease_mod.process_start(pid) if pid else None,
    }


def test_first_run_acquires_the_same_run_renews_another_is_refused_naming_the_holder(tmp_path):
    lease = Lease(str(tmp_path))
    assert lease.acquire(record("run-a"))["result"] == "acquired"
    assert lease.acquire(record("run-a"))["result"] == "renewed"
    with pytest.raises(LeaseHeld) as held:
        lease.acquire(record("run-b"))
    assert held.value.lease["run_id"] == "run-a"
    text = lease_mod.describe(held.value.lease, str(held.value))
    assert "run run-a" in text and "me@ctl (run-a)" in text and "lease until" in text


def test_an_expired_lease_is_taken_over_and_returned_with_why(tmp_path):
    lease = Lease(str(tmp_path))
    lease.acquire(record("old", expires_in=1, now=time.time() - 10))
    taken = lease.acquire(record("new"))
    assert taken["result"] == "acquired"
    assert taken["previous"]["run_id"] == "old" and "expired at" in taken["previous"]["why"]
    assert lease.read()["run_id"] == "new"


def test_a_lease_whose_supervisor_died_is_expired_at_once_and_a_live_one_holds(tmp_path):
    child = subprocess.Popen(["sleep", "30"])
    try:
        lease = Lease(str(tmp_path))
        lease.acquire(record("held", pid=child.pid))
        with pytest.raises(LeaseHeld, match="its supervisor"):
            lease.acquire(record("other"))
    finally:
        child.kill()
        child.wait()
    taken = lease.acquire(record("other"))
    assert "is gone" in taken["previous"]["why"]


def test_pid_reuse_does_not_keep_a_lease_alive(tmp_path):
    lease = Lease(str(tmp_path))
    stale = record("reused", pid=os.getpid())
    stale["holder_start"] = (stale["holder_start"] or 0) + 1  # same pid, another process
    lease.acquire(stale)
    assert lease.acquire(record("next"))["previous"]["run_id"] == "reused"


def test_release_only_by_the_holder(tmp_path):
    lease = Lease(str(tmp_path))
    lease.acquire(record("a"))
    assert lease.release("b") is False
    assert lease.release("a") is True
    assert lease.read() is None
    assert lease.release("a") is False


def test_a_zombie_holder_is_not_alive():
    child = subprocess.Popen(["true"])
    lease = {"holder_pid": child.pid, "holder_start": lease_mod.process_start(child.pid)}
    for _attempt in range(500):  # exited, not yet reaped: a zombie (up to 10 s on a loaded machine)
        if lease_mod.process_start(child.pid) is None:
            break
        time.sleep(0.02)
    assert not lease_mod.holder_alive(lease)
    child.wait()


def test_a_corrupt_lease_reads_as_expired(tmp_path):
    (tmp_path / lease_mod.LEASE_FILE).write_text("{half")
    assert Lease(str(tmp_path)).acquire(record("a"))["previous"]["corrupt"] is True


def _race(directory, run_id, start, queue):
    while time.time() < start:
        time.sleep(0.001)
    try:
        Lease(directory).acquire(record(run_id))
        queue.put(run_id)
    except LeaseHeld:
        queue.put(None)


def test_many_runs_acquiring_at_once_exactly_one_wins(tmp_path):
    queue = multiprocessing.get_context("fork").Queue()
    start = time.time() + 0.3
    procs = [
        multiprocessing.get_context("fork").Process(target=_race, args=(str(tmp_path), f"r{i}", start, queue))
        for i in range(8)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(10)
    winners = [w for w in (queue.get(timeout=5) for _proc in procs) if w]
    assert len(winners) == 1
    assert Lease(str(tmp_path)).read()["run_id"] == winners[0]


def test_unusable_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(lease_mod.LeaseError, match="cannot create the lease directory"):
        Lease(str(blocker / "sub")).acquire(record("a"))


def test_a_setup_lease_of_a_gone_owner_is_expired_but_not_one_a_supervisor_holds(tmp_path):
    lease = Lease(str(tmp_path))
    lease.acquire(record("setup"))
    taken = lease.acquire(record("next"), gone_owner="me@ctl (setup)")
    assert taken["previous"]["why"] == "its controller process is gone"
    lease.release("next")
    child = subprocess.Popen(["sleep", "30"])
    try:
        lease.acquire(dict(record("supervised", pid=child.pid), owner="me@ctl (x)"))
        with pytest.raises(LeaseHeld):
            lease.acquire(record("other"), gone_owner="me@ctl (x)")
    finally:
        child.kill()
        child.wait()


def test_take_prunes_old_status_files_and_removes_orphans(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    old, new = runs / "old.json", runs / "new.json"
    old.write_text("{}")
    new.write_text("{}")
    os.utime(old, (time.time() - 30 * 86400,) * 2)
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[1] == "ps":
            return 0, "c1 aorta-benchmark-x x\nc2 aorta-benchmark-me me\n", ""
        return 0, "", ""

    taken = lease_mod.take(str(tmp_path), "me", "me@ctl", 60, run)
    assert not old.exists() and new.exists()
    assert taken["removed_containers"] == ["aorta-benchmark-x (run x)"] and calls[-1] == [
        "docker",
        "rm",
        "-f",
        "-v",
        "c1",
    ]
    with pytest.raises(LeaseHeld):  # check mode still refuses beside a live lease, and writes nothing
        lease_mod.take(str(tmp_path), "other", "o", 60, run, check_mode=True)
    assert Lease(str(tmp_path)).read()["run_id"] == "me"


def test_a_group_run_of_a_stopped_campaign_is_refused_the_node_and_nothing_is_touched(tmp_path):
    mark_stop(str(tmp_path), "c7", "stopped by aorta.cluster.stop from me at noon")
    calls = []
    with pytest.raises(LeaseError, match=r"campaign c7 was stopped by aorta\.cluster\.stop from me at noon: its run"):
        lease_mod.take(str(tmp_path), "c7-k2-g0", "me@ctl", 60, lambda argv: calls.append(argv) or (0, "", ""))
    assert Lease(str(tmp_path)).read() is None and calls == []
    # Another campaign's group, and the campaign's own id as a run's: taken.
    assert lease_mod.take(str(tmp_path), "c8-k2-g0", "me@ctl", 60, lambda argv: (0, "", ""))["result"] == "acquired"


def test_the_lease_directory_is_shared_like_tmp(tmp_path):
    directory = tmp_path / "var" / "aorta-cluster"
    Lease(str(directory)).acquire(record("a"))
    assert directory.stat().st_mode & 0o7777 == 0o1777
    assert (directory / lease_mod.LEASE_FILE).stat().st_mode & 0o777 == 0o644


def test_a_run_whose_controller_is_gone_is_stopped_and_the_node_taken_but_a_live_owners_run_is_refused(tmp_path):
    # A stand-in supervisor: it lets go of the lease when SIGTERM reaches it, as run_supervisor does.
    directory = str(tmp_path)
    script = (
        "import signal, sys, time\n"
        "sys.path[:0] = sys.argv[2].split(chr(10))\n"
        "from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import Lease\n"
        "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.3), Lease(sys.argv[1]).release('old'), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.1)\n"
    )
    argv = [sys.executable, "-c", script, directory, chr(10).join(sys.path)]  # this process's ansible_collections
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        Lease(directory).acquire(dict(record("old", pid=holder.pid), owner="me@ctl (pid 1)", grace_s=2))
        with pytest.raises(LeaseHeld, match="its supervisor"):  # its controller still runs: refused
            lease_mod.take(directory, "new", "me@ctl (pid 2)", 60, lambda argv: (0, "", ""), gone_owner="x")
        taken = lease_mod.take(
            directory, "new", "me@ctl (pid 2)", 60, lambda argv: (0, "", ""), gone_owner="me@ctl (pid 1)"
        )
        assert holder.wait(timeout=10) == 0
    finally:
        holder.kill()
        holder.wait()
    assert "stopped run old, whose controller (me@ctl (pid 1)) is gone" in taken["message"]
    assert Lease(directory).read()["run_id"] == "new"


def test_an_abandoned_supervisor_that_does_not_let_go_is_refused_after_its_bound(tmp_path):
    # It says ready once SIGTERM is ignored: signalled before that, bash would just die (seen once).
    script = "trap '' TERM; echo ready; sleep 30 & wait; sleep 30"
    child = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        lease = Lease(str(tmp_path))
        lease.acquire(dict(record("old", pid=child.pid), owner="gone"))
        ticks = iter(range(0, 10000, 50))
        with pytest.raises(LeaseHeld, match="did not stop within 90s"):
            lease_mod.stop_abandoned(lease, lease.read(), "gone", clock=lambda: next(ticks), sleep=lambda s: None)
    finally:
        child.kill()
        child.wait()


def test_tear_down_hands_files_back_removes_this_ranks_containers_and_names_a_failure():
    calls = []

    def run(argv, rm_rc=0):
        calls.append(argv)
        if argv[1] == "ps":
            return 0, "c1 aorta-benchmark-r1\n", ""
        return (rm_rc, "", "device busy\n") if argv[1] == "rm" else (0, "", "")

    done = lease_mod.tear_down(run, "docker", "r1", "2", ["/mnt/a", "/mnt/b"], 1000, 1000)
    assert done == {"removed_containers": ["aorta-benchmark-r1"], "chown": 0}
    ps, chown, rm = calls
    assert "label=aorta.cluster.run=r1" in ps and "label=aorta.cluster.node_rank=2" in ps
    assert chown == ["docker", "exec", "c1", "chown", "-R", "1000:1000", "/mnt/a", "/mnt/b"]
    assert rm == ["docker", "rm", "-f", "-v", "c1"]
    calls.clear()  # root's files need no hand-back; check mode lists and touches nothing
    assert lease_mod.tear_down(run, "docker", "r1", "2", ["/mnt/a"], 0, 0)["chown"] is None
    assert [argv[1] for argv in calls] == ["ps", "rm"]
    calls.clear()
    assert lease_mod.tear_down(run, "docker", "r1", "2", ["/mnt/a"], 1000, 1000, check_mode=True)["chown"] is None
    assert [argv[1] for argv in calls] == ["ps"]
    with pytest.raises(LeaseError, match="cannot remove run r1's containers aorta-benchmark-r1: device busy"):
        lease_mod.tear_down(lambda argv: run(argv, rm_rc=1), "docker", "r1", "2", [], 1000, 1000)
    # removed meanwhile by the node's supervisor: rm fails, the second listing is empty, all is well
    listings = iter(["c1 aorta-benchmark-r1\n", ""])

    def raced(argv):
        if argv[1] == "ps":
            return 0, next(listings), ""
        return (1, "", "No such container: c1\n") if argv[1] == "rm" else (0, "", "")

    raced_down = lease_mod.tear_down(raced, "docker", "r1", "2", [], 1000, 1000)
    assert raced_down["removed_containers"] == ["aorta-benchmark-r1"]
    # docker ps failing (the engine is gone): nothing to remove, not an error
    assert lease_mod.tear_down(lambda argv: (1, "", "no engine"), "docker", "r1", "2", [], 1000, 1000) == {
        "removed_containers": [],
        "chown": None,
    }
