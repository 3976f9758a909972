#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_probe
short_description: Everything preflight asks of a node, in one module run
version_added: 0.1.0
description:
  - "Gathers in one run what preflight needs of the node: docker's server version, the image's id,
    the aorta checkout's files, free space, GPU devices and count, the interfaces and their
    addresses, the video/render group ids and the devices a container needs, the node's clock."
  - "With O(lease), holds the node for the run first (see M(aorta.cluster.node_lease)); with O(port),
    picks a free TCP port on this node (see M(aorta.cluster.free_port)): give both to the head."
  - "It judges nothing: the action plugin of the same name judges the facts on the controller with
    O(expect) and fails with one line per failed check, naming the node, the check and the fix."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  docker:
    description: The docker command.
    type: str
    default: docker
  image:
    description: The image whose id to read.
    type: str
    default: ""
  root:
    description: The aorta checkout; O(paths) are relative to it and free space is read there.
    type: path
    default: ""
  paths:
    description: Files that must exist under O(root).
    type: list
    elements: str
    default: []
  count_gpus:
    description: Count the GPUs with amd-smi (else rocm-smi).
    type: bool
    default: false
  lease:
    description:
      - Hold the node for a run before anything else (keys C(run_id), C(directory), C(expires_in), C(owner)).
      - C(gone_owner) names an owner known dead (its controller process is gone); its lease taken
        during setup is then expired, and a run of it that a supervisor still runs is stopped first
        (the supervisor ends the workload, removes its container and lets go of the lease). The
        action plugin sets it when it finds so.
    type: dict
  port:
    description: Pick a free TCP port (keys C(addresses), C(start), C(end), C(exclude)).
    type: dict
  expect:
    description: What the action plugin judges the facts against (not used on the node).
    type: dict
  tools:
    description:
      - Files the node should have (keys C(name), C(path), C(size)); C(facts.tools) says which it has.
        A missing file's directory is created (shared like /tmp) for the copy that follows.
      - The action plugin fills it from its C(pyspy) argument (a controller path, V(auto) or empty),
        and returns C(derived.pyspy) (C(source), C(node_path), C(sha256), C(present), C(note)).
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: In check mode the lease is only checked (a live lease of another run still fails).
  diff_mode:
    support: none
  action:
    description: An action plugin of the same name runs on the controller around the module.
    support: full
"""

EXAMPLES = r"""
- name: Probe the head, hold it for this run and pick the rendezvous port
  aorta.cluster.node_probe:
    image: rocm/pytorch:latest
    root: /home/me/aorta
    paths: [config/distributed.yaml, train.py]
    lease: {run_id: "{{ aorta_run_id_resolved }}", directory: /var/tmp/aorta-cluster, expires_in: 2400}
    port: {addresses: [0.0.0.0, 10.224.0.11], start: 29500, end: 32767}
    expect: {min_free_gb: 10, vpc_ip: 10.224.0.11, require_gpu: true, gpus_needed: 8}
  when: inventory_hostname == groups['aorta_head'][0]
"""

RETURN = r"""
facts:
  description: What the node said (docker, image_id, paths, disk, gpu_devices, gpus, container_devices,
    group_ids, interfaces, uid, gid, tools, clock).
  returned: always
  type: dict
lease:
  description: What holding the node did (result, previous, stopped, removed_containers, message).
  returned: with O(lease)
  type: dict
port:
  description: The port picked.
  returned: with O(port)
  type: int
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils._lease import LeaseError, LeaseHeld, refusal, take
from ansible_collections.aorta.cluster.plugins.module_utils._ports import PortError, ephemeral_range, find_free_port
from ansible_collections.aorta.cluster.plugins.module_utils._probe import gather, tool_facts


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "docker": {"type": "str", "default": "docker"},
            "image": {"type": "str", "default": ""},
            "root": {"type": "path", "default": ""},
            "paths": {"type": "list", "elements": "str", "default": []},
            "count_gpus": {"type": "bool", "default": False},
            "lease": {"type": "dict"},
            "port": {"type": "dict"},
            "expect": {"type": "dict"},
            "tools": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {"changed": False}

    run = module.run_command  # run(argv) -> (rc, stdout, stderr), as _lease and _probe expect

    if p["lease"]:
        lease = p["lease"]
        try:
            result["lease"] = take(
                lease.get("directory") or "/var/tmp/aorta-cluster",
                str(lease["run_id"]),
                str(lease.get("owner") or ""),
                int(lease.get("expires_in") or 2400),
                run,
                p["docker"],
                module.check_mode,
                gone_owner=lease.get("gone_owner") or None,
            )
        except LeaseHeld as held:
            module.fail_json(
                msg=f"preflight[lease]: {refusal(held)}",
                holder=held.lease,
            )
        except LeaseError as exc:
            module.fail_json(msg=f"preflight[lease]: {exc}")
        result["changed"] = result["lease"]["result"] == "acquired" or bool(result["lease"]["removed_containers"])
    result["facts"] = gather(run, p["docker"], p["image"], p["root"], p["paths"], p["count_gpus"])
    result["facts"]["tools"] = tool_facts(p["tools"], module.check_mode)
    if p["port"]:
        port = p["port"]
        try:
            result["port"], _tried = find_free_port(
                int(port.get("start") or 29500),
                int(port.get("end") or 32767),
                [a for a in port.get("addresses") or ["0.0.0.0"] if a],
                [int(x) for x in port.get("exclude") or []],
                ephemeral_range(),
            )
        except PortError as exc:
            module.fail_json(msg=f"preflight[port]: {exc}", **result)
    result["facts"]["clock"] = time.time()  # last: the controller compares it with the answer's arrival
    module.exit_json(**result)


if __name__ == "__main__":
    main()
