# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's time bounds keep their order, so the node's supervisor always ends the run."""

from __future__ import annotations

import pytest

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
