# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every time bound of a run, and how each derives from the others (node and controller side,
standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax) too: the supervisor and the
head's aggregator read it on the node; the plan, preflight, the waits and the playbook's task
timeouts (the lookup aorta.cluster.time_bound) read it on the controller. A number changed here
moves every bound built on it, so no two copies can disagree.

The order that must hold, or the wrong party ends the run (tests/unit/plugins/plugin_utils/launch/test_plan.py
adds the supervisor's own waits up against it):
  supervisor's own end  <  the controller's wait  <  (an async wrapper's kill)  <  the container's sleep
"""

from __future__ import annotations

import math

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _kernel_log


class BoundError(ValueError):
    """A value a bound is derived from is not a usable number of seconds."""


# --- The node's reports to the head (module_utils/node_runtime/_head_link.py, _supervisor.py) ---
HEARTBEAT_S = 3.0  # how often a node reports; a lost datagram is covered by the next
REPLY_WAIT_S = 1.0  # how long a worker waits for the head's answer to one report
FINAL_REPORT_TRIES = 3  # the node's last report: a lost datagram asked again, a gone head not waited for

# --- The supervisor's own waits from its deadline (or the head's stop) to its end ---
REAP_AFTER_KILL_S = 5  # run_bounded: after its SIGKILL, how long the killed command may take to go
SIGNAL_COMMAND_S = 15  # the docker exec that sends SIGTERM or SIGKILL inside the container
KILL_WAIT_S = 10  # after SIGKILL: the workload's end
KILL_GROUP_WAIT_S = 5  # then the stuck launch command's own end, after its group is killed
CLEANUP_COMMAND_S = 120  # each cleanup command (hand-back of the files, container removal)
FABRIC_CHECK_S = 5  # the fabric check when the run did not end well (3 s connection, with room)
NODE_SCAN_S = _kernel_log.WORST_S  # the kernel log scan: journalctl, then dmesg
FINAL_REPORT_S = FINAL_REPORT_TRIES * REPLY_WAIT_S
DIAGNOSE_S = 30  # the diagnostics step's bound at the deadline (run_supervisor's default)
LEASE_MARGIN_S = 30  # the supervisor's lease, past its own worst-case stop

# --- Around the supervisor: what must outlast it ---
LAUNCH_MARGIN_S = 120  # the launch step over aorta_setup_timeout_seconds (its docker exec, the supervisor's start)
SETUP_MARGIN_S = 600  # preflight's lease over the setup timeout, until the supervisor takes it over
STOP_MARGIN_S = 30  # a stopping node's silence allowed past its own stop bound
WAIT_MARGIN_S = 60  # the controller's wait past the supervisor's latest end
ASYNC_MARGIN_S = 300  # an async wrapper's kill past the controller's wait
NEVER_STARTED_S = 120  # a supervisor's status not there this long after the wait began: it never started

# --- Preflight (node_prepare) ---
HEALTH_STEPS = 6  # the health checks' steps each bounded by aorta_health_step_timeout
HEALTH_MARGIN_S = 30  # the rest of the health checks (the NIC's, the kernel log's reads)
PROBES = 2  # the health checks count twice in the prepare task: every node's own (the head's beside the
# workers'), then a worker's again where its lease stopped another run's leftovers
PREPARE_MARGIN_S = 300  # the rest of a prepare task: ssh, docker, the image, the checkout, the lease
PROBE_MARGIN_S = 60  # a worker's own probe past its connection, fabric check and health checks
HEAD_WAIT_MIN_S = 10.0  # a worker always waits this long at least for the head's verdict
UNBOUNDED_PREPARE_S = 600  # the prepare task's length taken when it has no timeout of its own

# The tasks the lookup aorta.cluster.time_bound answers for, and the variables each reads.
TASK_VARIABLES = {
    "prepare": (
        "aorta_connect_timeout",
        "aorta_fabric_check_timeout",
        "aorta_health_checks",
        "aorta_health_step_timeout",
    ),
    "launch": ("aorta_setup_timeout_seconds",),
    "watch": ("aorta_timeout_seconds", "aorta_kill_grace_seconds"),
    "end": ("aorta_timeout_seconds", "aorta_kill_grace_seconds"),
}


def stop_bound_s(grace_seconds, diagnose_seconds, cleanup_commands=2):
    """The longest a supervisor takes from its deadline (or the head's stop) to its end, from the
    waits above: fabric check, capture (its last step killed at the budget's end), SIGTERM's docker
    exec, the grace, SIGKILL's, the waits after SIGKILL, the cleanup commands, the kernel log scan
    and the final report."""
    signal_command = SIGNAL_COMMAND_S + REAP_AFTER_KILL_S
    return (
        FABRIC_CHECK_S
        + diagnose_seconds
        + REAP_AFTER_KILL_S
        + 2 * signal_command
        + grace_seconds
        + KILL_WAIT_S
        + KILL_GROUP_WAIT_S
        + cleanup_commands * (CLEANUP_COMMAND_S + REAP_AFTER_KILL_S)
        + NODE_SCAN_S
        + FINAL_REPORT_S
    )


def run_lease_s(timeout_seconds, grace_seconds, diagnose_seconds, cleanup_commands, head_stopping_s=0):
    """How long the supervisor's lease holds from its start: the deadline, its own stop, and on the
    head ``head_stopping_s`` (it serves the others after its own end)."""
    own_stop = stop_bound_s(grace_seconds, diagnose_seconds, cleanup_commands)
    return timeout_seconds + own_stop + LEASE_MARGIN_S + head_stopping_s


def stopping_s(grace):
    """The silence the head allows a node that said it is stopping (its own stop, with room), which is
    also how long the head serves the others after its own end."""
    return stop_bound_s(grace, DIAGNOSE_S) + STOP_MARGIN_S


def supervisor_end_s(timeout, grace):
    """The latest a supervisor can finish: on the head, its deadline, its own stop, then serving the
    others until they end."""
    return timeout + stop_bound_s(grace, DIAGNOSE_S) + stopping_s(grace)


def wait_s(timeout, grace):
    """How long the controller waits for a run's end (the head's watch, each node's end)."""
    return supervisor_end_s(timeout, grace) + WAIT_MARGIN_S


def launch_timeout_s(setup):
    """The launch task's bound: a pull or load can take the whole setup timeout."""
    return setup + LAUNCH_MARGIN_S


def join_s(setup, timeout):
    """How long a node's supervisor waits for every node to join before its ranks start (a worker for
    the head's aggregator too): every node's launch step, within the run's deadline (which counts
    from the supervisor's start)."""
    return min(launch_timeout_s(setup), timeout)


def _whole(values, problem):
    try:
        return [int(value) for value in values]
    except (TypeError, ValueError):
        raise BoundError(problem) from None


def deadlines(timeout_seconds, grace_seconds, setup_timeout_seconds, heartbeat_timeout_seconds):
    """Seconds for each bound of a launched run, from aorta_timeout_seconds, aorta_kill_grace_seconds,
    aorta_setup_timeout_seconds and aorta_heartbeat_timeout (its one default is the role
    aorta.cluster.defaults': every caller passes it).

    heartbeat_timeout_s: a node's silence after which the head stops the run; join_s, stopping_s,
    supervisor_end_s, wait_s: as the functions above; async_s: the limit to give run_supervisor run
    under Ansible's async (its wrapper kills the job then; node_launch detaches it without one);
    setup_lease_s: how long preflight's lease holds before the supervisor renews it;
    container_lifetime_s: the container's own ``sleep``, the last resort if nobody removes it.
    Raises BoundError for values that are not whole numbers or too small.
    """
    timeout, grace, setup, heartbeat = _whole(
        (timeout_seconds, grace_seconds, setup_timeout_seconds, heartbeat_timeout_seconds),
        "aorta_timeout_seconds, aorta_kill_grace_seconds, aorta_setup_timeout_seconds and "
        "aorta_heartbeat_timeout must be whole numbers",
    )
    if timeout < 1 or grace < 0 or setup < 1 or heartbeat < 1:
        raise BoundError("timeouts must be at least 1 and the grace at least 0")
    wait = wait_s(timeout, grace)
    async_limit = wait + ASYNC_MARGIN_S
    return {
        "timeout_s": timeout,
        "grace_s": grace,
        "diagnose_s": DIAGNOSE_S,
        "heartbeat_timeout_s": heartbeat,
        "join_s": join_s(setup, timeout),
        "stopping_s": stopping_s(grace),
        "supervisor_end_s": supervisor_end_s(timeout, grace),
        "wait_s": wait,
        "async_s": async_limit,
        "setup_lease_s": setup_lease_s(setup),
        "container_lifetime_s": setup + async_limit,
    }


def setup_lease_s(setup):
    """How long preflight's lease holds: the launch, until the supervisor takes it over."""
    return setup + SETUP_MARGIN_S


def health_bound_s(step_timeout, checks):
    """The longest the health checks can take on one node: each GPU tool step, the NIC's and the
    kernel log's (0 when they are off)."""
    return HEALTH_STEPS * float(step_timeout) + HEALTH_MARGIN_S if checks else 0.0


def prepare_timeout_s(connect_timeout, fabric_check_timeout, health_bound):
    """The prepare task's bound: ssh's connection, the fabric check, the rest of a probe, and the
    health checks twice (every node's own at once, then a worker's again after its lease stopped
    another run's leftovers)."""
    total = float(connect_timeout) + float(fabric_check_timeout) + PREPARE_MARGIN_S + PROBES * health_bound
    return math.ceil(total)


def head_wait_s(task_timeout, connect_timeout, fabric_check_timeout, health_bound):
    """How long a worker waits for the head's verdict in preflight: bounded below the prepare task's
    own timeout by the worker's own probe, so that a head that hangs is named, not the worker."""
    own = float(connect_timeout) + float(fabric_check_timeout) + PROBE_MARGIN_S + health_bound
    return max(HEAD_WAIT_MIN_S, float(task_timeout or UNBOUNDED_PREPARE_S) - own)


def task_timeout(task, values):
    """Seconds for one task of the playbook, from its ``TASK_VARIABLES`` in ``values`` (templated;
    aorta_health_checks a bool): ``prepare`` and ``launch`` are task ``timeout:`` values; ``watch``
    and ``end`` are how long their waits for the run's end go on (the wait gives up and says so)."""
    if task not in TASK_VARIABLES:
        raise BoundError(f"no time bound named {task!r}: one of {', '.join(TASK_VARIABLES)}")
    got = {}
    for name in TASK_VARIABLES[task]:
        value = values.get(name)
        if name == "aorta_health_checks":
            got[name] = bool(value)
            continue
        try:
            got[name] = int(value)
        except (TypeError, ValueError):
            raise BoundError(f"{name} must be a whole number of seconds, not {value!r}") from None
        if got[name] < 0:
            raise BoundError(f"{name} must not be negative, not {value!r}")
    if task == "prepare":
        health = health_bound_s(got["aorta_health_step_timeout"], got["aorta_health_checks"])
        return prepare_timeout_s(got["aorta_connect_timeout"], got["aorta_fabric_check_timeout"], health)
    if task == "launch":
        return launch_timeout_s(got["aorta_setup_timeout_seconds"])
    # Whole seconds, as a task's timeout and the waits' timeout_seconds take them.
    return math.ceil(wait_s(got["aorta_timeout_seconds"], got["aorta_kill_grace_seconds"]))
