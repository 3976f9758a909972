#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_lease
short_description: Hold a node for one run at a time
version_added: 0.1.0
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
    description: The docker command used to remove the containers of an expired run (and of this run with O(node_rank)).
    type: str
    default: docker
  node_rank:
    description:
      - With O(state=released) - first remove this node's containers of O(run_id) (labelled
        C(aorta.cluster.run) and C(aorta.cluster.node_rank)); the backstop of the supervisor's own
        cleanup, for a run that stopped before launch or whose supervisor was not seen to finish.
      - "Where nodes share a docker engine, each removes only its own rank's."
    type: str
  chown_paths:
    description:
      - Paths inside the container handed back to the SSH user (C(chown -R) in the container) before
        it is removed, when that user is not root; files a root container wrote stay the user's to
        collect and delete.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: In check mode a live lease of another run still fails; nothing is written or removed.
  diff_mode:
    support: none
  action:
    description: An action plugin of the same name runs on the controller around the module.
    support: full
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

- name: Tear down - remove this node's containers of the run (files handed back first), then release
  aorta.cluster.node_lease:
    run_id: "{{ aorta_run_id_resolved }}"
    state: released
    node_rank: "{{ aorta_node_rank }}"
    chown_paths: [/mnt/.aorta-cluster/run-1, /mnt/aorta_runs/run-1]
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
stopped:
  description: The run that was stopped first because its controller is gone (only through M(aorta.cluster.node_probe)).
  returned: when O(state=acquired)
  type: str
  sample: "stopped run 20261201T101500-a1b2c3, whose controller (me@ctl (ansible-playbook pid 41)) is gone, in 4s"
removed_containers:
  description:
    - Containers of runs without a live lease that were removed (names and run ids); with
      O(state=released) and O(node_rank), this node's containers of O(run_id) (names).
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import (
    Lease,
    LeaseError,
    LeaseHeld,
    refusal,
    take,
    tear_down,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
            "run_id": {"type": "str", "required": True},
            "directory": {"type": "path", "default": "/var/tmp/aorta-cluster"},
            "expires_in": {"type": "int", "default": 1800},
            "owner": {"type": "str", "default": ""},
            "docker": {"type": "str", "default": "docker"},
            "node_rank": {"type": "str"},
            "chown_paths": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "released":
            removed = []
            if p["node_rank"] is not None:
                removed = tear_down(
                    module.run_command,
                    p["docker"],
                    p["run_id"],
                    p["node_rank"],
                    p["chown_paths"],
                    os.getuid(),
                    os.getgid(),
                    module.check_mode,
                )["removed_containers"]
            lease = Lease(p["directory"])
            if module.check_mode:
                current = lease.read()
                released = bool(current and current.get("run_id") == p["run_id"])
            else:
                released = lease.release(p["run_id"])
            said = [f"removed {', '.join(removed)}"] if removed else []
            said += [f"lease of run {p['run_id']} released"] if released else []
            module.exit_json(
                changed=released or bool(removed),
                result="released" if released else "not_held",
                removed_containers=removed,
                message="; ".join(said),
            )
        taken = take(
            p["directory"], p["run_id"], p["owner"], p["expires_in"], module.run_command, p["docker"], module.check_mode
        )
    except LeaseHeld as held:
        module.fail_json(msg=refusal(held), holder=held.lease)
    except LeaseError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=taken["result"] == "acquired" or bool(taken["removed_containers"]), **taken)


if __name__ == "__main__":
    main()
