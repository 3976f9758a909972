#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_lease
short_description: Hold a node for one run at a time
version_added: 0.2.0
description:
  - "Takes, renews or releases the node's lease: one JSON file in a node-local directory that names
    the run that owns the node's GPUs, its owner and when the lease expires. Two runs acquiring at
    once cannot both win (every change holds an flock)."
  - "A live lease of another run fails the module, naming that run, its owner and its expiry, and
    nothing is changed. An expired lease (past its expiry, or its supervisor process gone) is taken
    over: the containers of that run are removed first, and the result says so."
  - "Containers labelled C(aorta.cluster.run) of any run that holds no live lease are orphans
    (a controller or supervisor died before it could remove them); they are removed on acquire."
  - The action plugin of the same name fills O(owner) with the controller's user, host and
    ansible-playbook process id.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  state:
    description: V(acquired) takes or renews the lease; V(released) drops it if O(run_id) holds it.
    type: str
    choices: [acquired, released]
    default: acquired
  run_id:
    description: The run that takes or releases the lease.
    type: str
    required: true
  directory:
    description:
      - Node-local directory of the lease. Never a shared file system (one lease would then cover
        every node).
    type: path
    default: /var/tmp/aorta-cluster
  expires_in:
    description: Seconds from now until the lease expires unless renewed (the run's setup deadline).
    type: int
    default: 1800
  owner:
    description: Who takes the lease, for the message another run gets.
    type: str
    default: ""
  docker:
    description: The docker command used to remove the containers of an expired run.
    type: str
    default: docker
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: In check mode a live lease of another run still fails; nothing is written or removed.
  diff_mode:
    support: none
notes:
  - The run supervisor (M(aorta.cluster.run_supervisor)) renews the lease with its own process and
    the run's deadline, and releases it when it has removed the container.
"""

EXAMPLES = r"""
- name: Hold every node for this run (the head first, so two runs cannot split the cluster)
  aorta.cluster.node_lease:
    run_id: "{{ aorta_run_id_resolved }}"
    expires_in: 1800

- name: Release it
  aorta.cluster.node_lease:
    run_id: "{{ aorta_run_id_resolved }}"
    state: released
"""

RETURN = r"""
result:
  description: V(acquired), V(renewed), V(released), V(not_held) or V(free) (check mode).
  returned: always
  type: str
  sample: acquired
previous:
  description: The expired lease that was taken over, with C(why) it had expired.
  returned: when a lease was taken over
  type: dict
  sample:
    run_id: 20261201T101500-a1b2c3
    owner: root@ctl (ansible-playbook pid 41)
    why: its supervisor (pid 88) is gone
removed_containers:
  description: Containers of runs without a live lease that were removed (names and run ids).
  returned: always
  type: list
  elements: str
  sample: ["aorta-benchmark-20261201T101500-a1b2c3 (run 20261201T101500-a1b2c3)"]
holder:
  description: The live lease of another run, when the module failed because of it.
  returned: failure
  type: dict
message:
  description: One line saying what was done.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils._lease import (
    Lease,
    LeaseError,
    LeaseHeld,
    boot_id,
    describe,
    liveness,
)


def _orphans(module, docker, keep_run):
    """(id, name, run) of every aorta container whose run is not ``keep_run``."""
    rc, out, _err = module.run_command(
        [
            docker,
            "ps",
            "-a",
            "--filter",
            "label=aorta.cluster.run",
            "--format",
            '{{.ID}} {{.Names}} {{.Label "aorta.cluster.run"}}',
        ]
    )
    if rc != 0:
        return []
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] != keep_run:
            found.append(tuple(parts))
    return found


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
            "run_id": {"type": "str", "required": True},
            "directory": {"type": "path", "default": "/var/tmp/aorta-cluster"},
            "expires_in": {"type": "int", "default": 1800},
            "owner": {"type": "str", "default": ""},
            "docker": {"type": "str", "default": "docker"},
        },
        supports_check_mode=True,
    )
    p = module.params
    lease = Lease(p["directory"])
    node = os.uname()[1]
    try:
        if p["state"] == "released":
            if module.check_mode:
                current = lease.read()
                held = bool(current and current.get("run_id") == p["run_id"])
                module.exit_json(
                    changed=held, result="released" if held else "not_held", removed_containers=[], message=""
                )
            released = lease.release(p["run_id"])
            module.exit_json(
                changed=released,
                result="released" if released else "not_held",
                removed_containers=[],
                message="lease of run {} released".format(p["run_id"]) if released else "",
            )
        now = time.time()
        if module.check_mode:
            current = lease.read()
            if current and current.get("run_id") != p["run_id"]:
                live, why = liveness(current, now)
                if live:
                    raise LeaseHeld(current, why)
            module.exit_json(changed=False, result="free", removed_containers=[], message="")
        record = {
            "run_id": p["run_id"],
            "owner": p["owner"],
            "acquired_at": round(now, 3),
            "expires_at": round(now + p["expires_in"], 3),
            "holder_pid": None,
            "holder_start": None,
            "boot_id": boot_id(),
            "node": node,
        }
        taken = lease.acquire(record, now)
    except LeaseHeld as held:
        module.fail_json(
            msg=f"node {node} is held by {describe(held.lease, str(held))}: "
            "not launching beside it (wait for it, or stop it)",
            holder=held.lease,
        )
    except LeaseError as exc:
        module.fail_json(msg=str(exc))
    removed = []
    for cid, name, run in _orphans(module, p["docker"], p["run_id"]):
        rc, _out, err = module.run_command([p["docker"], "rm", "-f", "-v", cid])
        if rc != 0:
            module.fail_json(msg=f"cannot remove {name}, a container of run {run} with no live lease: {err.strip()}")
        removed.append(f"{name} (run {run})")
    parts = ["lease {} for run {}".format(taken["result"], p["run_id"])]
    if taken["previous"]:
        parts.append("took over from {}".format(describe(taken["previous"], taken["previous"].get("why", ""))))
    if removed:
        parts.append("removed orphaned containers " + ", ".join(removed))
    module.exit_json(
        changed=taken["result"] == "acquired" or bool(removed),
        result=taken["result"],
        previous=taken["previous"],
        removed_containers=removed,
        message="; ".join(parts),
    )


if __name__ == "__main__":
    main()
