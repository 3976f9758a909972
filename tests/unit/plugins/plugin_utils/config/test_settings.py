# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import threading

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings


def test_values_are_templated_and_a_missing_one_names_the_defaults_role():
    task_vars = {"aorta_a": "{{ x }}", "aorta_b": 2}
    assert _settings.read(lambda v: "X" if v == "{{ x }}" else v, task_vars, ["aorta_a", "aorta_b"]) == {
        "aorta_a": "X",
        "aorta_b": 2,
    }
    with pytest.raises(_settings.SettingsError, match=r"aorta_c, aorta_d: not set; .* aorta.cluster.defaults"):
        _settings.read(str, task_vars, ["aorta_d", "aorta_c", "aorta_a"])


def test_a_waiter_sees_the_file_once_it_is_written_whole(tmp_path):
    path = str(tmp_path / ".plan" / "head.json")
    timer = threading.Timer(0.3, _settings.write_json, (path, {"ok": True, "port": 29501}))
    timer.start()
    try:
        assert _settings.wait_json(path, 10, poll_s=0.05) == {"ok": True, "port": 29501}
    finally:
        timer.cancel()
    assert not list((tmp_path / ".plan").glob("*.tmp"))


def test_a_waiter_gives_up_after_its_bound():
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    assert _settings.wait_json("/nonexistent/head.json", 5, poll_s=1, clock=lambda: now[0], sleep=sleep) is None
    assert now[0] == 5


def test_a_waiter_for_a_run_does_not_take_an_earlier_runs_file(tmp_path):
    path = str(tmp_path / ".plan" / "head.json")
    _settings.write_json(path, {"run_id": "earlier", "ok": True, "port": 29501})
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] >= 2:
            _settings.write_json(path, {"run_id": "this", "ok": True, "port": 29502})

    found = _settings.wait_json(path, 5, poll_s=1, clock=lambda: now[0], sleep=sleep, run_id="this")
    assert found == {"run_id": "this", "ok": True, "port": 29502} and now[0] == 2
    now[0] = 10.0  # past the writes above: nothing for run "other" ever comes
    assert _settings.wait_json(path, 3, poll_s=1, clock=lambda: now[0], sleep=sleep, run_id="other") is None
    assert now[0] == 13


class _Connection:
    def __init__(self, options):
        self._options = dict(options)

    def set_option(self, name, value):
        self._options[name] = value


def test_ssh_gets_the_connect_timeout_and_other_connections_are_left_alone():
    ssh, local = _Connection({"timeout": 10}), _Connection({})
    _settings.bound_connection(ssh, "30")
    _settings.bound_connection(local, 30)
    assert ssh._options == {"timeout": 30} and local._options == {}


def test_each_run_gets_its_own_ssh_master_unless_the_user_chose_a_control_path():
    """A master from an earlier run to a node that has hung since would hold the first command for
    about a minute, past any ConnectTimeout."""
    node = {"timeout": 10, "control_path": None, "host": "10.0.0.1", "port": 22, "remote_user": "me"}
    first, again, other_run = _Connection(node), _Connection(node), _Connection(node)
    _settings.bound_connection(first, 30, "run1")
    _settings.bound_connection(again, 30, "run1")
    _settings.bound_connection(other_run, 30, "run2")
    path = first._options["control_path"]
    assert path.startswith("%(directory)s/aorta-") and len(path) == len("%(directory)s/aorta-") + 10
    assert again._options["control_path"] == path and other_run._options["control_path"] != path
    fresh = _Connection(node)
    _settings.bound_connection(fresh, 30, "run1", fresh=True)
    # A node the head counted as gone: not the run's master, which a vanished node leaves stuck.
    assert fresh._options["control_path"] not in (path, other_run._options["control_path"])
    mine = _Connection(dict(node, control_path="/tmp/cp/%%h"))
    _settings.bound_connection(mine, 30, "run1")
    assert mine._options["control_path"] == "/tmp/cp/%%h"


def test_an_earlier_commands_master_is_never_reused_and_every_master_has_a_keepalive(monkeypatch):
    """A stop and then a trace_collect of the same run id, from two ansible-playbook processes: the
    second must not talk through the first's master (ControlPersist keeps it a minute), which a node
    that hung since would hold for ever where no ServerAlive was set (ansible-core's own ssh_args)."""
    node = {"timeout": 10, "control_path": None, "host": "10.0.0.1", "port": 22, "remote_user": "me"}
    node.update(ssh_args="-C -o ControlMaster=auto -o ControlPersist=60s", ssh_common_args="", ssh_extra_args="")
    paths = []
    for parent in (100, 100, 200):
        monkeypatch.setattr(_settings.os, "getppid", lambda parent=parent: parent)
        connection = _Connection(node)
        _settings.bound_connection(connection, 30, "run1")
        paths.append(connection._options["control_path"])
        assert connection._options["ssh_extra_args"] == "-o ServerAliveInterval=15"
    assert paths[0] == paths[1] != paths[2]  # one master per ansible-playbook process
    # The user's own keepalive, or extra args, are kept as given.
    theirs = _Connection(dict(node, ssh_common_args="-o ServerAliveInterval=5"))
    _settings.bound_connection(theirs, 30, "run1")
    assert theirs._options["ssh_extra_args"] == ""
    jump = _Connection(dict(node, ssh_extra_args="-o ProxyJump=bastion"))
    _settings.bound_connection(jump, 30, "run1")
    assert jump._options["ssh_extra_args"] == "-o ProxyJump=bastion -o ServerAliveInterval=15"


def test_rank_order_takes_the_runs_order_once_computed_and_sorts_only_without_it():
    hostvars = {"b": {"aorta_node_rank": "1"}, "a": {"aorta_node_rank": 0}}
    kept = {"hostvars": dict(hostvars, localhost={"aorta_rank_order": ["a", "b"]})}
    assert _settings.rank_order(lambda v: v, kept, ["b", "a"]) == ["a", "b"]
    # Computed for other nodes (another inventory, a --limit): sorted here from each node's rank.
    other = {"hostvars": dict(hostvars, localhost={"aorta_rank_order": ["a", "z"]})}
    assert _settings.rank_order(lambda v: v, other, ["b", "a"]) == ["a", "b"]
    assert _settings.rank_order(lambda v: v, {"hostvars": hostvars}, ["b", "a"]) == ["a", "b"]


def test_in_rank_order_follows_the_rank_not_the_group_order():
    hostvars = {"b": {"aorta_node_rank": "1"}, "a": {"aorta_node_rank": 2}, "c": {"aorta_node_rank": 0}, "x": {}}
    assert _settings.in_rank_order(lambda v: v, hostvars, ["a", "b", "c", "x"]) == ["c", "b", "a", "x"]


def test_a_file_is_written_whole_with_its_mode_and_read_back_as_an_object(tmp_path):
    path = tmp_path / "healthy.cluster.json"
    _settings.write_text_atomic(str(path), '{"password": "x"}', 0o600)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and _settings.read_json_object(str(path)) == {"password": "x"}
    (tmp_path / "list.json").write_text("[1]")
    assert _settings.read_json_object(str(tmp_path / "list.json")) is None
    assert _settings.read_json_object(str(tmp_path / "none.json")) is None
    with pytest.raises(OSError):
        _settings.write_text_atomic(str(tmp_path / "no-dir" / "f"), "x")
    assert list(tmp_path.glob("**/*.tmp")) == []


def test_the_plan_is_under_the_results_directory_else_never_in_the_results_root(tmp_path):
    """A run's results directory holds its plan; a dry run's (--check: none made) goes to the
    machine's temporary directory, the same for every step of that run."""
    run = tmp_path / "root" / "r1"
    assert not run.exists()
    dry = _settings.plan_dir(str(run))
    assert dry == _settings.plan_dir(str(run)) and not dry.startswith(str(tmp_path))
    run.mkdir(parents=True)
    assert _settings.plan_dir(str(run)) == str(run / ".plan")
