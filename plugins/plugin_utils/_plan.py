# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every time bound a run derives from its deadlines, in one place (controller side).

Private to this collection. The node's supervisor keeps the run's deadline; everything around it
must outlast it in a fixed order, or the wrong party ends the run:
  supervisor's own end  <  the controller's wait  <  the async wrapper's kill  <  the container's sleep
"""

from __future__ import annotations

from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils import _supervisor as _sv
from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError

DIAGNOSE_S = 30  # the diagnostics step's bound at the deadline (run_supervisor's default)
SETUP_MARGIN_S = 600
JOIN_S = 120  # a worker's wait for the head's aggregator, and the head's for each node's first report
HEARTBEAT_TIMEOUT_S = 30  # aorta_heartbeat_timeout's default: a blip must not end a 1000-node run
STOP_MARGIN_S = 30


def launch_deadlines(
    timeout_seconds: Any,
    grace_seconds: Any,
    setup_timeout_seconds: Any,
    heartbeat_timeout_seconds: Any = HEARTBEAT_TIMEOUT_S,
) -> dict[str, int]:
    """Seconds for each bound, from aorta_timeout_seconds, aorta_kill_grace_seconds,
    aorta_setup_timeout_seconds and aorta_heartbeat_timeout.

    heartbeat_timeout_s: a node's silence after which the head stops the run;
    join_s: how long a worker waits for the head's aggregator (and the head for each first report);
    stopping_s: the silence allowed a node that said it is stopping (capture, grace, kill, cleanup),
    which is also how long the head serves the others after its own end;
    supervisor_end_s: the latest a supervisor can finish (deadline, diagnostics, grace, kill,
    cleanup, and on the head the wait for the others' end);
    wait_s: how long the controller watches a node before it gives up on it;
    async_s: the async job's limit, after which Ansible's wrapper kills the supervisor;
    setup_lease_s: how long preflight's lease holds before the supervisor renews it;
    container_lifetime_s: the container's own `sleep`, the last resort if nobody removes it.
    """
    try:
        timeout, grace, setup = int(timeout_seconds), int(grace_seconds), int(setup_timeout_seconds)
        heartbeat = int(heartbeat_timeout_seconds)
    except (TypeError, ValueError):
        raise LaunchError(
            "launch_deadlines: aorta_timeout_seconds, aorta_kill_grace_seconds, "
            "aorta_setup_timeout_seconds and aorta_heartbeat_timeout must be whole numbers"
        ) from None
    if timeout < 1 or grace < 0 or setup < 1 or heartbeat < 1:
        raise LaunchError("launch_deadlines: timeouts must be at least 1 and the grace at least 0")
    # A node's own stop, from its deadline (or the head's word) to its end: the capture (its last step
    # killed at the budget's end), SIGTERM, the grace, SIGKILL, cleanup.
    own_stop = _sv.stop_bound_s(grace, DIAGNOSE_S)
    stopping = own_stop + STOP_MARGIN_S
    # The head's worst case: its own stop, then serving the others until they end (stopping).
    supervisor_end = timeout + own_stop + stopping
    wait = supervisor_end + 60
    async_limit = wait + 300
    return {
        "timeout_s": timeout,
        "grace_s": grace,
        "diagnose_s": DIAGNOSE_S,
        "heartbeat_timeout_s": heartbeat,
        "join_s": JOIN_S,
        "stopping_s": stopping,
        "supervisor_end_s": supervisor_end,
        "wait_s": wait,
        "async_s": async_limit,
        "setup_lease_s": setup + SETUP_MARGIN_S,
        "container_lifetime_s": setup + async_limit,
    }
