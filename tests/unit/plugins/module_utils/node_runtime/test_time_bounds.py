# SPDX-License-Identifier: GPL-3.0-or-later
"""Every time bound from one module: the numbers the playbook's tasks had, each derived from the
bound under it, and the node-side code reading the same constants."""

from __future__ import annotations

import inspect
import math

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _supervisor, _time_bounds
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import BoundError, task_timeout


def prepare_values(connect=30, fabric=30, checks=True, step=30):
    return {
        "aorta_connect_timeout": connect,
        "aorta_fabric_check_timeout": fabric,
        "aorta_health_checks": checks,
        "aorta_health_step_timeout": step,
    }


@pytest.mark.parametrize("connect,fabric,checks,step", [(30, 30, True, 30), (5, 7, True, 120), (30, 30, False, 30)])
def test_the_prepare_timeout_is_the_playbooks_and_counts_the_probes_health_bound_twice(connect, fabric, checks, step):
    # What aorta_multinode.yml wrote in Jinja before the lookup.
    jinja = connect + fabric + 300 + ((12 * step + 60) if checks else 0)
    assert task_timeout("prepare", prepare_values(connect, fabric, checks, step)) == jinja
    health = _time_bounds.health_bound_s(step, checks)
    assert jinja == connect + fabric + _time_bounds.PREPARE_MARGIN_S + _time_bounds.PROBES * health


def test_a_workers_wait_for_the_head_stays_below_the_prepare_task_by_its_own_probe():
    health = _time_bounds.health_bound_s(30, True)
    timeout = _time_bounds.prepare_timeout_s(30, 30, health)
    waited = _time_bounds.head_wait_s(timeout, 30, 30, health)
    assert waited + 30 + 30 + _time_bounds.PROBE_MARGIN_S + health == timeout
    assert _time_bounds.head_wait_s(None, 30, 30, health) == 600 - (30 + 30 + 60 + health)  # no task timeout
    assert _time_bounds.head_wait_s(50, 30, 30, health) == _time_bounds.HEAD_WAIT_MIN_S


def test_the_launch_timeout_is_the_setup_timeout_and_the_joins_bound_follows_it():
    assert task_timeout("launch", {"aorta_setup_timeout_seconds": "1800"}) == 1920
    assert _time_bounds.join_s(1800, 3600) == 1920 and _time_bounds.join_s(1800, 600) == 600


@pytest.mark.parametrize("task", ["watch", "end"])
def test_the_waits_for_the_end_are_the_launched_runs_wait_in_whole_seconds(task):
    d = _time_bounds.deadlines(3600, 30, 1800, 30)
    values = {"aorta_timeout_seconds": 3600, "aorta_kill_grace_seconds": "30"}
    assert task_timeout(task, values) == math.ceil(d["wait_s"]) and isinstance(task_timeout(task, values), int)


def test_the_deadlines_keep_their_numbers_and_order():
    d = _time_bounds.deadlines(3600, 30, 1800, 30)
    stop = _time_bounds.stop_bound_s(30, 30)
    assert d["stopping_s"] == stop + 30 and d["supervisor_end_s"] == 3600 + stop + d["stopping_s"]
    assert d["wait_s"] == d["supervisor_end_s"] + 60 and d["async_s"] == d["wait_s"] + 300
    assert d["container_lifetime_s"] == 1800 + d["async_s"] and d["setup_lease_s"] == 2400
    assert d["join_s"] == 1920 and d["heartbeat_timeout_s"] == 30 and d["diagnose_s"] == 30
    with pytest.raises(BoundError, match="whole numbers"):
        _time_bounds.deadlines(3600, 30, 1800, "soon")
    with pytest.raises(BoundError, match="at least"):
        _time_bounds.deadlines(3600, 30, 1800, 0)


def test_the_supervisors_lease_holds_past_its_stop_and_on_the_head_past_serving_the_others():
    own = _time_bounds.run_lease_s(3600, 30, 30, 2)
    assert own == 3600 + _time_bounds.stop_bound_s(30, 30, 2) + _time_bounds.LEASE_MARGIN_S
    assert _time_bounds.run_lease_s(3600, 30, 30, 2, head_stopping_s=400) == own + 400


def test_the_node_side_reads_the_same_heartbeat_and_stop_waits():
    defaults = inspect.signature(_supervisor.Supervisor).parameters
    assert defaults["heartbeat_every"].default == _time_bounds.HEARTBEAT_S == 3.0
    assert defaults["diagnose_seconds"].default == _time_bounds.DIAGNOSE_S
    assert _supervisor.CLEANUP_COMMAND_S is _time_bounds.CLEANUP_COMMAND_S
    assert _time_bounds.FINAL_REPORT_S == _time_bounds.FINAL_REPORT_TRIES * _time_bounds.REPLY_WAIT_S


def test_a_bad_task_or_value_is_refused_naming_it():
    with pytest.raises(BoundError, match="no time bound named 'run': one of prepare, launch, watch, end"):
        task_timeout("run", {})
    with pytest.raises(BoundError, match="aorta_setup_timeout_seconds must be a whole number of seconds, not 'x'"):
        task_timeout("launch", {"aorta_setup_timeout_seconds": "x"})
    with pytest.raises(BoundError, match="aorta_connect_timeout must be a whole number of seconds, not None"):
        task_timeout("prepare", dict(prepare_values(), aorta_connect_timeout=None))
    with pytest.raises(BoundError, match="aorta_kill_grace_seconds must not be negative"):
        task_timeout("watch", {"aorta_timeout_seconds": 60, "aorta_kill_grace_seconds": -1})
