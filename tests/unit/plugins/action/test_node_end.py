# SPDX-License-Identifier: GPL-3.0-or-later
"""node_end over a two-node "cluster" of local hosts with nothing launched: each node's lease
released, its run's new files packed, pulled (one at a time) and checked, its archive removed."""

from __future__ import annotations

import hashlib
import os
import tarfile
from types import SimpleNamespace

from test_node_prepare import PREPARE, leases, run_vars

from ansible_collections.aorta.cluster.plugins.action.node_end import ActionModule, collect_floor
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _pull
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import node_state

END = {"name": "End", "aorta.cluster.node_end": None, "register": "aorta_end"}


def test_each_nodes_new_files_are_pulled_checked_and_its_archive_removed(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_collect_parallel": 1, "aorta_collect_since": 0}
    host_vars = leases(tmp_path)
    for rank, name in enumerate(host_vars):
        node_root = tmp_path / f"node{rank}"
        trace = node_root / "out" / "torch_profiler" / f"rank{rank}" / "trace.json"
        trace.parent.mkdir(parents=True)
        trace.write_text('{"traceEvents": []}')
        host_vars[name] |= {"aorta_path": str(node_root), "aorta_output_dir": "out"}
        (node_root / "config").mkdir()
        (node_root / "config" / "distributed.yaml").write_text("")
        (node_root / "train.py").write_text("")
    settings.pop("aorta_path")
    _proc, out = cluster_play([PREPARE, END], host_vars=host_vars, extra_vars=settings)
    for rank, name in enumerate(host_vars):
        end = out["aorta_end"][name]
        assert not end.get("failed"), end.get("msg")
        assert end["node_result"]["state"] == "not_started" and end["node_result"]["rank"] == rank
        assert end["teardown"]["changed"]  # the lease preflight took is released
        # Not launched: no wait; the teardown and the collection each timed.
        assert sorted(end["seconds"]) == ["collect", "teardown"] and min(end["seconds"].values()) > 0
        assert end["collect"]["files"] == 1 and len(str(end)) < 4000  # the row is kept in a file
        row = _pull.row_of(end["collect"])
        assert row["error"] == "" and row["pull_attempts"] == 1 and row["rank"] == rank
        archive = tmp_path / "results" / ".staging" / f"node_{rank}" / "traces.tar"
        assert row["archive"] == str(archive)
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == row["archive_sha256"]
        assert [f["path"] for f in row["files"]] == [f"torch_profiler/rank{rank}/trace.json"]
        assert not os.path.exists(tmp_path / f"node{rank}" / ".aorta-cluster" / "prep-run" / "traces.tar")
        if row["compression"] == "none":
            with tarfile.open(archive) as tar:
                assert tar.getnames() == [f"torch_profiler/rank{rank}/trace.json"]


class SshConnection:
    """What _stream_argv reads of ansible.builtin.ssh: its transport, options and command builder."""

    transport = "ssh"
    host = "10.0.0.7"

    def __init__(self, password=None):
        self.options = {"password": password, "ssh_executable": "ssh"}
        self.built = []

    def get_option(self, name):
        return self.options[name]

    def _build_command(self, binary, subsystem, *args):
        self.built.append((binary, subsystem, *args))
        return [binary.encode(), b"-o", b"ControlPath=/cp", *(a.encode() for a in args)]


def stream_argv(connection, python=None, password=None):
    action = ActionModule.__new__(ActionModule)
    action._connection = connection
    action._play_context = SimpleNamespace(password=password)
    action._vars = {"ansible_python_interpreter": python} if python else {}
    action._templar = SimpleNamespace(template=lambda value: value)
    settings = {"aorta_path": "/home/me/aorta", "aorta_collect_compression": "auto"}
    return action._stream_argv(settings, "/home/me/aorta/aorta_runs/r1", 1796000000.5)


def test_an_ssh_node_streams_over_its_own_connection_with_the_nodes_python():
    connection = SshConnection()
    argv = stream_argv(connection, python="/opt/py/bin/python3")
    assert connection.built == [
        ("ssh", "ssh", "10.0.0.7", "/opt/py/bin/python3 - /home/me/aorta/aorta_runs/r1 1796000000.5 auto")
    ]
    assert argv[:3] == [b"ssh", b"-o", b"ControlPath=/cp"]
    assert stream_argv(SshConnection(), python="auto_silent")[-1].startswith(b"python3 - ")


def test_a_password_or_another_connection_pulls_an_archive_instead():
    assert stream_argv(SshConnection(password="s3cret")) is None
    assert stream_argv(SshConnection(), password="s3cret") is None
    local = SshConnection()
    local.transport = "local"
    assert stream_argv(local) is None


def test_on_the_archive_path_a_node_with_nothing_new_is_collected_with_no_file(tmp_path):
    """CVS's own case: trace_pack packs no archive when nothing is new; that is 0 files collected,
    not "pack failed" (which a failed pack still is)."""
    action = ActionModule.__new__(ActionModule)
    action._connection = SshConnection(password="s3cret")  # the archive path, not the stream
    action._play_context = SimpleNamespace(password=None)
    action._templar = SimpleNamespace(template=lambda value: value)
    action._vars = {}
    answers = [{"files": [], "archive": None, "compression": "none", "changed": False}]
    action._execute_module = lambda **_kwargs: answers[0]
    settings = {
        "aorta_results_dir_resolved": str(tmp_path),
        "aorta_node_rank": 1,
        "aorta_run_id_resolved": "r1",
        "aorta_path": "/aorta",
        "aorta_collect_since": 0,
        "aorta_collect_compression": "gzip",
        "aorta_collect_parallel": 1,
    }
    record = {"rank": 1, "name": "n1", "mgmt_ip": "n1", "vpc_ip": "10.0.0.1", "state": "ok"}
    row = action._collect(settings, {}, record, "output", gone=False, why="")
    assert row["error"] == "" and row["files"] == [] and row["archive"] == ""
    answers[0] = {"failed": True, "msg": "cannot pack /aorta/output: disk full"}
    assert action._collect(settings, {}, record, "output", gone=False, why="")["error"] == answers[0]["msg"]


def test_the_collect_floor_is_aorta_collect_since_else_the_launchs_start_floor():
    # The node's summary (aorta_collect_traces sample, none) and its collection take the same files: those at or
    # after this floor.
    launch = {"started": {"start_floor": 1796040000.5}}
    assert collect_floor({"aorta_collect_since": None}, launch) == 1796040000.5
    assert collect_floor({"aorta_collect_since": 1700000000}, launch) == 1700000000.0
    assert collect_floor({"aorta_collect_since": None}, {}) == 0.0


def test_a_node_a_re_attached_watch_could_not_reach_is_not_asked_again_and_ends_unreachable():
    task = SimpleNamespace(args={}, async_val=0, check_mode=False, action="aorta.cluster.node_end")
    action = ActionModule(task, SimpleNamespace(_shell=SimpleNamespace(tmpdir=None)), SimpleNamespace(), None, None)
    launch = {"unreachable": "n2: ssh: connect to host n2 port 22: No route to host"}
    wait = action._wait_for_run({}, launch, {}, "n2", "h", 2, {}, {})
    assert wait["node_unreachable"] is True and wait["polls"] == 0
    assert node_state(wait)["state"] == "unreachable"
