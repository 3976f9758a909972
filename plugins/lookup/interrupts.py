# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: interrupts
short_description: Make the first Ctrl-C or SIGTERM stop the run everywhere; returns the hosts it is given
version_added: 0.1.0
author:
  - aorta.cluster maintainers (@aorta-cluster)
description:
  - "Templated in ansible-playbook's main process (a play's C(hosts), as C(aorta.cluster.aorta_multinode)'s
    first controller play names them), once its task queue manager exists: puts a handler in front of
    Ansible's own for SIGINT and SIGTERM and, in the environment every worker inherits,
    C(AORTA_STOP_REQUEST), a folder for the stop request. Returns its terms unchanged."
  - "The first signal writes the request (when, which signal) and prints, once, C(stopping the run on N
    nodes; interrupt again to leave now); ansible-playbook carries on. Preflight and the launch refuse once
    they see it (the rescue tears down what exists); the head's watch tells the head (one command at its
    next poll; the head stops every node: SIGTERM, C(aorta_kill_grace_seconds), SIGKILL); collection carries
    on. C(run.json) then says C(STOPPED) with the reason, the phase and each node's steps, and the play exits
    non-zero."
  - "A second signal prints the command that stops the run later (C(ansible-playbook aorta.cluster.stop
    -i <cluster file> -e aorta_run_id=<id>)) and hands the signal to Ansible: it leaves at once, as before."
  - "A SIGKILL (an AWX cancel, a CI runner's last word) cannot be trapped: the nodes keep the run to its
    deadline, and the next run, or the stop playbook, stops it."
options:
  _terms:
    description: What to return (the play's hosts).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Prepare the run on the controller
  hosts: "{{ lookup('aorta.cluster.interrupts', 'localhost') }}"
  gather_facts: false
  tasks: []
"""

RETURN = r"""
_raw:
  description: The terms, unchanged.
  type: list
  elements: str
"""

import os

from ansible.plugins.lookup import LookupBase

from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt


def _stderr(line: str) -> None:
    """From a signal handler: one write, no lock (the console's display may hold its own)."""
    os.write(2, (line + "\n").encode("utf-8", "replace"))


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        _interrupt.install(_stderr)
        return [str(term) for term in terms]
