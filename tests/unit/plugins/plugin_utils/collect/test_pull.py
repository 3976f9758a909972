# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import hashlib
import threading
import time

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import sha256_file
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _pull


def test_no_more_pulls_than_slots_at_once_across_threads(tmp_path):
    """Each node's end is its own forked worker; lock files bound the pulls whatever the forks."""
    inside, most, lock = [0], [0], threading.Lock()

    def pull():
        with _pull.slot(str(tmp_path / "slots"), 2, poll_s=0.01):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=pull) for _thread in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert most[0] == 2 and inside[0] == 0


def _never(_seconds):
    raise AssertionError("blocked")


def test_a_slot_is_freed_when_the_pull_raises(tmp_path):
    try:
        with _pull.slot(str(tmp_path), 1):
            raise OSError("connection reset")
    except OSError:
        pass
    with _pull.slot(str(tmp_path), 1, sleep=_never) as index:
        assert index == 0


def test_the_archive_hash_is_read_in_chunks(tmp_path):
    """The pull checks an archive with the one sha256 helper the nodes pack with (trace_analysis)."""
    path = tmp_path / "traces.tar"
    data = b"x" * (3 * 1024 * 1024 + 7)  # more than one chunk, and not a whole number of them
    path.write_bytes(data)
    assert sha256_file(str(path)) == hashlib.sha256(data).hexdigest()


def test_a_node_row_names_its_archive_only_when_it_arrived():
    node = {"rank": 1, "name": "gpu-b", "mgmt_ip": "10.0.0.2", "vpc_ip": "10.1.0.2"}
    pack = {"archive": "/n/traces.tar", "archive_sha256": "ab", "compression": "zstd", "files": [{"path": "a"}]}
    row = _pull.manifest_row(node, "ok", pack, "/c/node_1/traces.tar", "", {"attempts": 2, "msg": ""})
    assert row["archive"] == "/c/node_1/traces.tar" and row["pull_attempts"] == 2 and row["compression"] == "zstd"
    failed = _pull.manifest_row(node, "ok", pack, "/c/node_1/traces.tar", "pull failed: reset", {"msg": "r" * 400})
    assert failed["archive"] == "" and failed["error"] == "pull failed: reset" and len(failed["pull_msg"]) == 300
    gone = _pull.manifest_row(node, "unreachable", None, "/c/x", "unreachable: timed out", {})
    assert gone["files"] == [] and gone["archive_sha256"] == "" and gone["compression"] == "none"


def test_each_node_lands_in_its_own_directory():
    paths = {_pull.staging_path("/res", rank) for rank in range(3)}
    assert len({p.rsplit("/", 1)[0] for p in paths}) == 3
    assert _pull.staging_path("/res", "2") == "/res/.staging/node_2/traces.tar"


def test_a_transfer_is_retried_apart_and_its_last_error_kept(tmp_path):
    """The stream and the archive pull share one retry: a broken transfer (PullError, OSError) is
    tried again after the delay, in a slot; its value comes back on the first success."""
    slept, outcomes = [], [_pull.PullError("ssh ended with 255"), OSError("disk"), "tree"]

    def transfer():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    got = _pull.attempts(transfer, str(tmp_path / "slots"), 1, 3, 3, sleep=slept.append)
    assert got == {"ok": True, "msg": "", "attempts": 3, "value": "tree"} and slept == [3, 3]

    def broken():
        raise _pull.PullError("the archive's sha256 is 0, the node packed 1")

    got = _pull.attempts(broken, str(tmp_path / "slots"), 1, 3, 3, sleep=slept.append)
    assert got == {"ok": False, "msg": "the archive's sha256 is 0, the node packed 1", "attempts": 3, "value": None}
    assert slept == [3, 3, 3, 3]  # no wait after the last try
