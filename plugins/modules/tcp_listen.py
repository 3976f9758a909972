#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: tcp_listen
short_description: Accept a number of TCP connections on a port, then stop
version_added: 0.1.0
description:
  - Listens on O(address):O(port) until O(expected) connections have arrived or O(timeout) seconds
    have passed, and reports who connected. Each connection is closed at once.
  - Preflight runs it on the head node, asynchronously, on the port picked for the rendezvous,
    while every worker connects to the head's fabric address; so a fabric that does not carry
    the rendezvous is found before anything is launched. The port is free again when it returns.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  port:
    description: TCP port to listen on.
    type: int
    required: true
  address:
    description: Address to bind.
    type: str
    default: 0.0.0.0
  expected:
    description: Stop after this many connections.
    type: int
    required: true
  timeout:
    description: Stop after this many seconds at the latest.
    type: int
    default: 60
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Listening changes nothing on the node; the module behaves the same in check mode.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Listen on the head while the workers connect
  aorta.cluster.tcp_listen:
    port: 29500
    expected: "{{ groups.aorta_workers | length }}"
    timeout: 60
  async: 90
  poll: 0
"""

RETURN = r"""
peers:
  description: Source addresses of the connections, in arrival order.
  returned: always
  type: list
  elements: str
  sample: ["10.224.0.12"]
complete:
  description: Whether O(expected) connections arrived before the timeout.
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils._ports import accept_peers


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "port": {"type": "int", "required": True},
            "address": {"type": "str", "default": "0.0.0.0"},
            "expected": {"type": "int", "required": True},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        peers = accept_peers(params["port"], params["expected"], params["timeout"], params["address"])
    except OSError as exc:
        module.fail_json(msg=f"cannot listen on {params['address']}:{params['port']}: {exc.strerror}", peers=[])
    module.exit_json(changed=False, peers=peers, complete=len(peers) >= params["expected"])


if __name__ == "__main__":
    main()
