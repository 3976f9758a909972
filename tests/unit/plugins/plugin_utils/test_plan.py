# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's time bounds keep their order, so the node's supervisor always ends the run."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils import _aggregator, _kernel_log
from ansible_collections.aorta.cluster.plugins.module_utils import _supervisor as sv
from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError
from ansible_collections.aorta.cluster.plugins.plugin_utils._plan import launch_deadlines


@pytest.mark.parametrize("timeout,grace,setup", [(1, 0, 1), (60, 10, 1800), (3600, 30, 1800), (86400, 600, 60)])
def test_every_bound_outlasts_the_one_before_it(timeout, grace, setup):
    d = launch_deadlines(timeout, grace, setup)
    # the supervisor's worst case: deadline, diagnostics, grace, SIGKILL wait, cleanup
    assert d["supervisor_end_s"] >= timeout + d["diagnose_s"] + grace
    assert d["supervisor_end_s"] < d["wait_s"] < d["async_s"] < d["container_lifetime_s"]
    assert d["container_lifetime_s"] > setup + d["async_s"] - 1
    assert d["setup_lease_s"] > setup


def test_text_numbers_from_a_survey_are_taken_and_bad_ones_refused():
    assert launch_deadlines("60", "10", "1800")["timeout_s"] == 60
    with pytest.raises(LaunchError, match="whole numbers"):
        launch_deadlines("soon", 10, 1800)
    with pytest.raises(LaunchError, match="at least"):
        launch_deadlines(0, 10, 1800)


def supervisor_worst_case(timeout, grace, diagnose_s=30, fabric_s=3, linger_s=0):
    """What the supervisor itself can take, added up from its own constants: the deadline, the
    fabric check, the capture (its last step killed at the budget), SIGTERM's docker exec, the grace,
    SIGKILL's docker exec, the waits after SIGKILL, both cleanup commands, the kernel log scan, the
    final report to the head, and on the head the wait for the others."""
    signal_command = sv.SIGNAL_COMMAND_S + sv.REAP_AFTER_KILL_S
    return (
        timeout
        + fabric_s
        + diagnose_s
        + sv.REAP_AFTER_KILL_S
        + signal_command
        + grace
        + signal_command
        + sv.KILL_WAIT_S
        + sv.KILL_GROUP_WAIT_S
        + 2 * (sv.CLEANUP_COMMAND_S + sv.REAP_AFTER_KILL_S)
        + _kernel_log.WORST_S
        + 3 * _aggregator.REPLY_WAIT_S  # the final report's three tries
        + linger_s
    )


@pytest.mark.parametrize("timeout,grace", [(1, 0), (60, 10), (3600, 30), (86400, 600)])
def test_the_controllers_wait_outlasts_the_supervisors_worst_case_from_its_own_constants(timeout, grace):
    d = launch_deadlines(timeout, grace, 1800, 30)
    own = supervisor_worst_case(timeout, grace)
    assert own - timeout <= sv.stop_bound_s(grace, 30)  # the lease and the plan use this bound
    # A node's own stop fits in the silence the head allows a stopping node.
    assert d["stopping_s"] >= own - timeout
    # The head: its own worst case, then serving the others for as long as a stopping node may be silent.
    head = supervisor_worst_case(timeout, grace, linger_s=d["stopping_s"])
    assert head <= d["supervisor_end_s"] < d["wait_s"] < d["async_s"]
