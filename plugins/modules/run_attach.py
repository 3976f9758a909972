#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: run_attach
short_description: Re-attach to a run launched from another controller, by its id
version_added: 0.1.0
description:
  - "Reads back, on one node, what M(aorta.cluster.run_supervisor) kept there at launch for a watch
    re-attached to the run (C(runs/<run_id>.attach.json): the node's probe and launch results), the
    supervisor's status and the node's lease. One remote command per node, once."
  - "The action plugin of the same name hands the probe and launch results to the play as the node's
    C(aorta_prepare) and C(aorta_launch), so the run is watched, ended, collected and recorded as the
    play that launched it would have (the playbook C(aorta.cluster.watch)). On the cluster file's head, an id that
    launched nothing there fails, naming the run that holds the node, if any; elsewhere such a node is ended as not
    launched, and one the run excluded as excluded. A node where the run's supervisor ran but whose kept launch
    cannot be read (launched by another account: the file is 0600) fails rather than be taken for either."
  - "With O(purpose=stop), O(run_id) may be a scaling campaign's id (M(aorta.cluster.campaign_run)): on each node
    it stands for the campaign's group run that holds the node (its lease), else the last of the campaign's group
    runs that ran there; so one stop by the campaign's id reaches the head of every group that runs. Where the id
    ran nothing of its own, the stop is also left on the node (C(stops/<run_id>) in O(directory), kept two weeks):
    a later group run of the campaign is refused when it takes the node, so a stop between rungs, or while a group
    is in its preflight, still ends the campaign."
  - "The registered result of the action is not the module's: for V(watch) C(prepare), C(launch), C(run_started_epoch)
    and C(state); for V(stop) C(state), C(outcome), C(reason), C(asked_head), C(waited_s), C(run_id) (the group
    run of a campaign's id), C(node_rank) (that run's rank here, when its launch kept it), C(holder) (who holds the
    node, where nothing of the id ran here) and, for a run that had already ended, C(line)."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  run_id:
    description: The run to re-attach to (the run printed it at its start).
    type: str
    required: true
  directory:
    description: The node-local directory of the lease and the supervisors' status files.
    type: path
    default: /var/tmp/aorta-cluster
  purpose:
    description:
      - "V(watch): the node's probe and launch results for the plays that follow; on the cluster file's head, a run
        that launched nothing there and holds no lease fails, naming the run that holds the node, if any."
      - "V(stop): on the head, the same refusal; a run that has already ended is said in one line (nothing is left
        to stop) and the module does not fail."
      - "V(confirm): once, on the controller, after every node's V(watch) (registered as C(aorta_attach)): with the
        head unreachable nothing refuses an id it never ran, so a run that no node that answered holds fails here,
        in one line naming the nodes not reached, and nothing is recorded for it. The action plugin answers it;
        no node is contacted."
    type: str
    choices: [watch, stop, confirm]
    default: watch
  stop_reason:
    description:
      - "With O(purpose=stop): on the run's head (the node that holds the run's aggregate), the head's stop request
        is written with this reason, unless the run has ended; its aggregator then stops every node the usual way
        (SIGTERM, grace, SIGKILL, cleanup)."
    type: str
    default: ""
  wait_seconds:
    description:
      - With O(purpose=stop), how long to wait for this node's supervisor to finish after the request (the stop
        bound); C(status) is then read again.
    type: int
    default: 0
  grace_seconds:
    description:
      - The kill grace O(wait_seconds) was counted with; where the run's own (its kept launch's) is longer, the wait
        is longer by the difference, so a run SIGTERM'd by the stop gets its whole grace before anything is removed.
    type: int
    default: 0
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: It only reads; with O(purpose=stop) no request is written and nothing is waited for.
  diff_mode:
    support: none
  action:
    description: An action plugin of the same name runs on the controller around the module.
    support: full
"""

EXAMPLES = r"""
- name: Re-attach to a run by its id
  aorta.cluster.run_attach:
    run_id: 20261201T101500-a1b2c3
"""

RETURN = r"""
attach:
  description:
    - What the launch kept for a re-attached watch (C(prepare), C(launch), C(run_started_epoch),
      C(supervisor_pid)); null when the run launched nothing here.
  returned: always
  type: dict
status:
  description: The supervisor's status (C(state), C(finished), C(outcome), C(reason)); null when there is none.
  returned: always
  type: dict
attach_error:
  description: Why the kept launch could not be read (for example a permission denied to another account); empty else.
  returned: always
  type: str
lease:
  description: The node's lease (C(run_id), C(live), C(why), C(line)); null when the node is free.
  returned: always
  type: dict
asked_head:
  description: Whether this node, the run's head, was given the stop request (O(purpose=stop)).
  returned: always
  type: bool
waited_s:
  description: Seconds waited for the supervisor to finish (O(wait_seconds)).
  returned: always
  type: float
run_id:
  description:
    - The run this answer is about, O(run_id) itself or, for a stop by a scaling campaign's id, the campaign's
      group run on this node.
  returned: always
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._aggregator import stop_request_path
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import mark_stop, of_campaign
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import (
    Lease,
    LeaseError,
    describe,
    liveness,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._supervisor import (
    aggregate_path,
    attach_path,
    status_path,
)

STATUS_KEYS = ("state", "finished", "outcome", "reason", "ended_at")


def read_json(path, errors=None):
    """The JSON object at ``path``; None when it is missing or not an object. Why it could not be
    read (not its absence) goes into ``errors`` when given."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if errors is not None:
            errors.append(getattr(exc, "strerror", None) or str(exc))
        return None
    return data if isinstance(data, dict) else None


def lease_of(directory, now):
    """The node's lease as the controller needs it; None when the node is free."""
    try:
        lease = Lease(directory).read()
    except LeaseError as exc:
        return {"run_id": None, "live": False, "why": str(exc), "line": str(exc)}
    if lease is None:
        return None
    live, why = liveness(lease, now)
    return {"run_id": lease.get("run_id"), "live": live, "why": why, "line": describe(lease, why)}


def attached(directory, run_id, now):
    status = read_json(status_path(directory, run_id))
    errors = []
    kept = read_json(attach_path(directory, run_id), errors)
    return {
        "attach": kept,
        "attach_error": f"unreadable here ({errors[0]})" if errors else "",
        "status": {k: status.get(k) for k in STATUS_KEYS} if status else None,
        "lease": lease_of(directory, now),
    }


def campaign_run(directory, run_id, now):
    """``run_id``, or, where it ran nothing of its own here and is a scaling campaign's id, the
    campaign's group run that holds this node (its lease), else the last that ran here (the newest
    status: a node that sits out a rung, or that the campaign left out, still answers for it)."""
    if os.path.exists(status_path(directory, run_id)) or os.path.exists(attach_path(directory, run_id)):
        return run_id
    lease = lease_of(directory, now)
    if lease and lease.get("live") and of_campaign(run_id, lease.get("run_id")):
        return lease["run_id"]
    runs = os.path.join(directory, "runs")
    found = []
    try:
        names = os.listdir(runs)
    except OSError:
        return run_id
    for name in names:
        held = name[: -len(".json")]
        if name.endswith(".json") and of_campaign(run_id, held):
            try:
                found.append((os.path.getmtime(os.path.join(runs, name)), held))
            except OSError:
                continue
    return max(found)[1] if found else run_id


def ask_head(directory, run_id, reason, status):
    """The stop request beside the run's aggregate, on the head only (the node that has one), once,
    while the run goes on. True when the request is there."""
    aggregate = aggregate_path(directory, run_id)
    if not reason or not os.path.exists(aggregate):
        return False
    if status and status.get("finished"):
        return False
    path = stop_request_path(aggregate)
    if os.path.exists(path):
        return True
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as handle:
            handle.write(reason[:500] + "\n")
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def stop_wait_s(asked, grace_s, kept):
    """The wait the stop asked for (``asked``, counted with its own grace ``grace_s``), longer by what
    the run's own grace, as its kept launch says, exceeds it: a SIGTERM'd run gets its whole grace."""
    deadlines = ((kept or {}).get("launch") or {}).get("deadlines") or {}
    try:
        run_grace = float(deadlines.get("grace_s") or 0)
    except (TypeError, ValueError):
        run_grace = 0.0
    return asked + max(0.0, run_grace - grace_s)


def wait_for_end(directory, run_id, seconds, clock=time.monotonic, sleep=time.sleep):
    """Seconds spent until this node's supervisor says finished (at most ``seconds``)."""
    began = clock()
    path = status_path(directory, run_id)
    while clock() - began < seconds:
        status = read_json(path)
        if not status or status.get("finished"):
            break
        sleep(1)
    return round(clock() - began, 3)


def main():
    module = AnsibleModule(
        argument_spec={
            "run_id": {"type": "str", "required": True},
            "directory": {"type": "path", "default": "/var/tmp/aorta-cluster"},
            "purpose": {"type": "str", "choices": ["watch", "stop", "confirm"], "default": "watch"},
            "stop_reason": {"type": "str", "default": ""},
            "wait_seconds": {"type": "int", "default": 0},
            "grace_seconds": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["purpose"] == "confirm":
        module.fail_json(msg="purpose=confirm is answered on the controller, by the action plugin of the same name")
    run_id = p["run_id"]
    if p["purpose"] == "stop":
        run_id = campaign_run(p["directory"], run_id, time.time())
    found = attached(p["directory"], run_id, time.time())
    asked, waited = False, 0.0
    stopping = p["purpose"] == "stop" and not module.check_mode
    if stopping and (run_id != p["run_id"] or not found["status"]):
        # Nothing of the id's own ran here: it may be a campaign's, whose later group runs must not start.
        mark_stop(p["directory"], p["run_id"], p["stop_reason"])
    if stopping:
        asked = ask_head(p["directory"], run_id, p["stop_reason"], found["status"])
        if found["status"] and not found["status"].get("finished") and p["wait_seconds"] > 0:
            waited = wait_for_end(
                p["directory"], run_id, stop_wait_s(p["wait_seconds"], p["grace_seconds"], found["attach"])
            )
            found = attached(p["directory"], run_id, time.time())
    module.exit_json(changed=asked, asked_head=asked, waited_s=waited, run_id=run_id, **found)


if __name__ == "__main__":
    main()
