#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: free_port
short_description: Pick a free TCP port on the node that will listen on it
version_added: 0.1.0
description:
  - "Returns a TCP port that a listener can bind right now on every given address of the node the
    module runs on. Run it on the HEAD node (C(delegate_to) the head, C(run_once)): a port that is
    free on the controller says nothing about the head."
  - Candidates come from O(port_range_start)..O(port_range_end), minus O(exclude), minus the kernel's
    ephemeral range (C(/proc/sys/net/ipv4/ip_local_port_range)) unless O(avoid_ephemeral=false),
    starting at a random offset so two runs picking at once rarely collide.
  - The port is released again before the module returns; the caller should bind it soon.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  addresses:
    description:
      - Addresses the listener will bind. torchrun's rendezvous store listens on all addresses, so
        the default checks V(0.0.0.0); add the node's fabric address to also prove that the node
        holds it.
    type: list
    elements: str
    default: ["0.0.0.0"]
  port_range_start:
    description: First port to consider.
    type: int
    default: 29500
  port_range_end:
    description: Last port to consider.
    type: int
    default: 32767
  exclude:
    description: Ports never to return (for example ports a firewall blocks, or other services).
    type: list
    elements: int
    default: []
  avoid_ephemeral:
    description: Skip the kernel's ephemeral range, where outgoing connections take their local ports.
    type: bool
    default: true
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: The module only probes; it behaves the same in check mode.
  diff_mode:
    support: none
notes:
  - There is a window between the pick and torchrun's bind in which another process can take the
    port. Sites with firewalls between nodes should set a fixed port instead.
seealso:
  - name: torchrun
    description: The launcher whose rendezvous listens on the port.
    link: https://docs.pytorch.org/docs/stable/elastic/run.html
"""

EXAMPLES = r"""
- name: Pick the rendezvous port on the head node
  aorta.cluster.free_port:
    addresses:
      - 0.0.0.0
      - "{{ hostvars[groups.aorta_head[0]].aorta_vpc_ip }}"
    exclude: [29501]
  delegate_to: "{{ groups.aorta_head[0] }}"
  run_once: true
  register: aorta_port

- name: Use it
  ansible.builtin.debug:
    msg: "torchrun --master_port={{ aorta_port.port }}"
"""

RETURN = r"""
port:
  description: A port every address could bind.
  returned: success
  type: int
  sample: 30117
addresses:
  description: The addresses that were checked.
  returned: success
  type: list
  elements: str
  sample: ["0.0.0.0", "10.224.0.11"]
tried:
  description: How many candidate ports were probed.
  returned: success
  type: int
  sample: 1
ephemeral_range:
  description: The kernel's ephemeral range that was skipped, if any.
  returned: success
  type: list
  elements: int
  sample: [32768, 60999]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._ports import (
    PortError,
    ephemeral_range,
    find_free_port,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "addresses": {"type": "list", "elements": "str", "default": ["0.0.0.0"]},
            "port_range_start": {"type": "int", "default": 29500},
            "port_range_end": {"type": "int", "default": 32767},
            "exclude": {"type": "list", "elements": "int", "default": []},
            "avoid_ephemeral": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    addresses = [a for a in params["addresses"] if a] or ["0.0.0.0"]
    avoid = ephemeral_range() if params["avoid_ephemeral"] else None
    try:
        port, tried = find_free_port(
            params["port_range_start"], params["port_range_end"], addresses, params["exclude"], avoid
        )
    except PortError as exc:
        module.fail_json(msg=str(exc), addresses=addresses)
    module.exit_json(
        changed=False, port=port, addresses=addresses, tried=tried, ephemeral_range=list(avoid) if avoid else []
    )


if __name__ == "__main__":
    main()
