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
  - "Gathers in one run what preflight needs of the node: docker's server version, the image's id (the
    image pulled first where missing, with O(pull)), the aorta checkout's files, free space, GPU devices
    and count, the interfaces and their addresses, the video/render group ids and the devices a
    container needs, the node's clock."
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
  pull:
    description:
      - "Pull O(image) when the node lacks it, in this same module run: C(docker pull) starts in its own
        session and is watched until it ends, shows that the registry has the image (its first line of
        progress), or has said nothing for O(pull.answer_s) seconds (it is then stopped). C(facts.pull) says
        which: C(state) V(pulled), V(pulling) (the layers are coming: the pull goes on on the node, detached,
        and the launch's own pull joins it), V(failed) (C(error): docker's own error line) or V(no answer)."
      - Not in check mode. Without it a missing image is only reported (C(facts.image_id) null).
    type: dict
    suboptions:
      answer_s:
        description: Seconds the pull has to show progress or fail.
        type: float
        default: 60
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
  health:
    description:
      - "Read the node's health and fingerprint too (C(facts.health)): the GPUs amd-smi (else rocm-smi, else
        C(/dev/dri/renderD*)) sees and how long it takes to answer, the processes already holding a GPU (by pid,
        name and user), ECC counts, the kernel log's GPU and NIC errors since the previous probe, and the kernel,
        ROCm, amdgpu, GPU model, VBIOS, fabric NIC, docker and image versions."
      - "Each tool runs in its own session for at most O(health.step_timeout) seconds and is killed, never
        waited on, when it overruns; after a GPU tool has timed out no other GPU tool is started."
    type: dict
    suboptions:
      step_timeout:
        description: Seconds each tool may take.
        type: float
        default: 30
      allow:
        description: Names of processes that may hold a GPU (monitoring agents).
        type: list
        elements: str
        default: []
      since_dir:
        description: Where the node keeps the time of its previous probe (the kernel log is read from then).
        type: str
        default: /var/tmp/aorta-cluster
      window_s:
        description: How far back the kernel log is read when the node has no previous probe.
        type: float
        default: 86400
      fabric_ip:
        description: The node's fabric address; the interface holding it is the fabric NIC of the fingerprint.
        type: str
        default: ''
  read:
    description:
      - A small file under O(root) whose text comes back as C(facts.read) (C(path), C(text), C(truncated),
        C(error)), at most 256 KiB; preflight reads the run's Aorta config on the head, for the report's
        run context (batch size, sequence length). A file that cannot be read is said, never a failure.
    type: str
    default: ""
  lease:
    description:
      - Hold the node for a run before anything else (see M(aorta.cluster.node_lease)).
    type: dict
    suboptions:
      run_id:
        description: The run that holds the node.
        type: str
        required: true
      directory:
        description: The node-local lease directory.
        type: str
        default: /var/tmp/aorta-cluster
      expires_in:
        description: Seconds the lease holds before the run's supervisor renews it.
        type: int
        default: 2400
      owner:
        description: Who holds it (the action plugin sets the controller's host, user and ansible-playbook pid).
        type: str
      gone_owner:
        description:
          - An owner known dead (its controller process is gone); its lease taken during setup is then
            expired, and a run of it that a supervisor still runs is stopped first (the supervisor ends
            the workload, removes its container and lets go of the lease). The action plugin sets it
            when it finds so.
        type: str
  port:
    description: Pick a free TCP port on this node (see M(aorta.cluster.free_port)).
    type: dict
    suboptions:
      addresses:
        description: The addresses the port must be free on.
        type: list
        elements: str
        default: ["0.0.0.0"]
      start:
        description: First port of the range.
        type: int
        default: 29500
      end:
        description: Last port of the range.
        type: int
        default: 32767
      exclude:
        description: Ports not to pick.
        type: list
        elements: int
        default: []
  expect:
    description:
      - What the action plugin judges the facts against, on the controller (never sent to the node).
    type: dict
    suboptions:
      image:
        description: The image the run needs.
        type: str
      image_archive:
        description: The controller-side archive that can load the image (C(aorta_image_archive)).
        type: str
      archive_exists:
        description: Whether that archive exists on the controller.
        type: bool
      archive_images:
        description:
          - The image names that archive holds (its C(manifest.json), read without unpacking it); null when
            that cannot be told cheaply (a compressed archive).
        type: list
        elements: str
      image_pull:
        description: C(aorta_image_pull) (V(missing) or V(never)); with V(never) a node without the image fails.
        type: str
      aorta_path:
        description: The aorta checkout, for the messages.
        type: str
      paths:
        description: Files under the checkout that must exist.
        type: list
        elements: str
      min_free_gb:
        description: Free GiB needed at the checkout.
        type: float
      require_gpu:
        description: Whether GPU devices and a GPU count are checked.
        type: bool
      gpus_needed:
        description: GPUs the node must have.
        type: int
      vpc_ip:
        description: The fabric address that must be on one of the node's interfaces.
        type: str
      extra_env:
        description: The user's environment, whose C(GLOO_SOCKET_IFNAME)/C(NCCL_SOCKET_IFNAME) are checked.
        type: dict
      slow_s:
        description: Seconds beyond which a GPU tool's answer fails the node (the driver may be wedged).
        type: float
      step_timeout:
        description: O(health.step_timeout), for the messages.
        type: float
      collect:
        description:
          - Whether the traces are collected. No check depends on it any more; the traces stream over the
            node's own connection (M(aorta.cluster.node_end)), so the node needs no rsync.
        type: bool
  pyspy:
    description:
      - "The controller's py-spy for the stacks of a hang, handled by the action plugin (never sent to the node):
        a controller path, V(auto) (the one on the controller's C(PATH), if any) or empty (none). The
        plugin asks the node whether it has that very binary (by size, under the lease directory's
        C(tools/)) and returns C(derived.pyspy) (C(source), C(node_path), C(sha256), C(present), C(note))."
    type: str
  tools:
    description:
      - Files the node should have (keys C(name), C(path), C(size)); C(facts.tools) says which it has.
        A missing file's directory is created (shared like /tmp) for the copy that follows.
      - The action plugin fills it from O(pyspy).
    type: list
    elements: dict
    default: []
  connect:
    description:
      - One TCP connection from the node to the head's rendezvous address, from the node's own address
        on the interface gloo will use; C(facts.connect) says whether the head answered (a refusal is
        an answer, since the path is there). Proves the fabric carries the rendezvous before anything starts.
    type: dict
    suboptions:
      host:
        description: The head's address on that interface.
        type: str
        required: true
      port:
        description: The rendezvous port picked on the head.
        type: int
        required: true
      source:
        description: This node's fabric address (vpc_ip), the source unless O(connect.interface) holds another.
        type: str
        required: true
      interface:
        description: The interface gloo is pinned to when the user forced one; its first IPv4 address is the source.
        type: str
        default: ''
      timeout:
        description: Seconds to wait for the head's answer.
        type: float
        default: 30
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
    group_ids, interfaces, uid, gid, tools, clock, health with O(health), and pull where O(pull) pulled).
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

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _health, _kernel_log
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._fabric import reach
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import (
    LeaseError,
    LeaseHeld,
    refusal,
    shared_dir,
    take,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._ports import (
    PortError,
    ephemeral_range,
    find_free_port,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._probe import gather, tool_facts


def connect_facts(connect: dict, interfaces: dict) -> dict:
    """One TCP connection to the head's rendezvous address from this node's own address on the
    interface gloo will use (the fabric address unless the user forced another interface)."""
    source = connect["source"]
    if connect["interface"]:
        own = [a for a in interfaces.get(connect["interface"], []) if ":" not in a]
        source = own[0] if own else source
    started = time.monotonic()
    reached, error = reach(source, connect["host"], connect["port"], connect["timeout"])
    return {"reached": reached, "error": error, "source": source, "seconds": round(time.monotonic() - started, 3)}


def health_facts(options: dict, facts: dict, check_mode: bool) -> dict:
    """The node's health and fingerprint; in check mode the previous probe's time is kept as it is."""
    fabric_ip = options.get("fabric_ip") or ""
    interface = next((name for name, addrs in (facts.get("interfaces") or {}).items() if fabric_ip in addrs), "")
    since_dir = options.get("since_dir") or "/var/tmp/aorta-cluster"
    if not check_mode:
        shared_dir(since_dir)  # as the lease's: shared like /tmp, whichever user probes first
    allow = list(_health.DEFAULT_ALLOW) + list(options.get("allow") or [])
    opts = dict(options, allow=allow, since_dir=since_dir, keep_marker=check_mode)
    return _health.gather(opts, facts, interface, _kernel_log.scan)


def _argument_spec() -> dict:
    """The module's options (DOCUMENTATION's), a new dict each call as AnsibleModule may change it."""
    return {
        "docker": {"type": "str", "default": "docker"},
        "image": {"type": "str", "default": ""},
        "pull": {"type": "dict", "options": {"answer_s": {"type": "float", "default": 60}}},
        "root": {"type": "path", "default": ""},
        "paths": {"type": "list", "elements": "str", "default": []},
        "count_gpus": {"type": "bool", "default": False},
        "read": {"type": "str", "default": ""},
        "health": {
            "type": "dict",
            "options": {
                "step_timeout": {"type": "float", "default": 30},
                "allow": {"type": "list", "elements": "str", "default": []},
                "since_dir": {"type": "str", "default": "/var/tmp/aorta-cluster"},
                "window_s": {"type": "float", "default": 86400},
                "fabric_ip": {"type": "str", "default": ""},
            },
        },
        "lease": {
            "type": "dict",
            "options": {
                "run_id": {"type": "str", "required": True},
                "directory": {"type": "str", "default": "/var/tmp/aorta-cluster"},
                "expires_in": {"type": "int", "default": 2400},
                "owner": {"type": "str"},
                "gone_owner": {"type": "str"},
            },
        },
        "port": {
            "type": "dict",
            "options": {
                "addresses": {"type": "list", "elements": "str", "default": ["0.0.0.0"]},
                "start": {"type": "int", "default": 29500},
                "end": {"type": "int", "default": 32767},
                "exclude": {"type": "list", "elements": "int", "default": []},
            },
        },
        # Judged by the action plugin and never sent: documented here, not validated here.
        "expect": {
            "type": "dict",
            "options": {
                "image": {"type": "str"},
                "image_archive": {"type": "str"},
                "archive_exists": {"type": "bool"},
                "archive_images": {"type": "list", "elements": "str"},
                "image_pull": {"type": "str"},
                "aorta_path": {"type": "str"},
                "paths": {"type": "list", "elements": "str"},
                "min_free_gb": {"type": "float"},
                "require_gpu": {"type": "bool"},
                "gpus_needed": {"type": "int"},
                "vpc_ip": {"type": "str"},
                "extra_env": {"type": "dict"},
                "slow_s": {"type": "float"},
                "step_timeout": {"type": "float"},
                "collect": {"type": "bool"},
            },
        },
        "pyspy": {"type": "str"},
        "tools": {"type": "list", "elements": "dict", "default": []},
        "connect": {
            "type": "dict",
            "options": {
                "host": {"type": "str", "required": True},
                "port": {"type": "int", "required": True},
                "source": {"type": "str", "required": True},
                "interface": {"type": "str", "default": ""},
                "timeout": {"type": "float", "default": 30},
            },
        },
    }


def _hold_node(module: AnsibleModule, run, result: dict) -> None:
    """Holds the node for the run (O(lease)): what that did goes to result["lease"] and, when it took
    the lease or removed containers, result["changed"]; fails the module when another run holds it."""
    lease = module.params["lease"]
    try:
        result["lease"] = take(
            lease.get("directory") or "/var/tmp/aorta-cluster",
            str(lease["run_id"]),
            str(lease.get("owner") or ""),
            int(lease.get("expires_in") or 2400),
            run,
            module.params["docker"],
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


def _pick_port(module: AnsibleModule, result: dict) -> None:
    """Puts a free TCP port of this node (O(port)) in result["port"]; fails the module, with what
    ``result`` holds so far, when there is none."""
    port = module.params["port"]
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


def main() -> None:
    module = AnsibleModule(argument_spec=_argument_spec(), supports_check_mode=True)
    p = module.params
    result: dict = {"changed": False}

    run = module.run_command  # run(argv) -> (rc, stdout, stderr), as _lease and _probe expect

    if p["lease"]:
        _hold_node(module, run, result)
    # The image pulled where missing, in this same run (no remote command more): preflight names a tag
    # the registry does not have, with docker's own error, before anything is launched.
    pull = None if module.check_mode else p["pull"]
    result["facts"] = gather(run, p["docker"], p["image"], p["root"], p["paths"], p["count_gpus"], p["read"], pull)
    result["facts"]["tools"] = tool_facts(p["tools"], module.check_mode)
    if p["health"]:
        result["facts"]["health"] = health_facts(p["health"], result["facts"], module.check_mode)
    if p["port"]:
        _pick_port(module, result)
    if p["connect"]:
        result["facts"]["connect"] = connect_facts(p["connect"], result["facts"].get("interfaces") or {})
    result["facts"]["clock"] = time.time()  # last: the controller compares it with the answer's arrival
    module.exit_json(**result)


if __name__ == "__main__":
    main()
