#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_wait
short_description: Wait for a node's run supervisor to finish, printing one progress line per poll
version_added: 0.1.0
description:
  - "Reads the status file that M(aorta.cluster.run_supervisor) keeps on the node, one command per
    poll (a long poll that returns as soon as the run has finished), until the supervisor says
    C(finished). The node keeps its own deadline; this only watches."
  - "Each node's latest status is kept in O(progress_dir) on the controller; once per poll one line
    sums up every node, for example C(running 62/64 nodes · step 17/200 · slowest rank 5 (node x) at
    12 · 03:12 left). No per-node retry lines."
  - "A node that cannot be reached for O(unreachable_polls) polls in a row is returned with C(node_unreachable); a
    supervisor that never wrote its status, or that never finished within O(timeout_seconds), is
    returned as C(lost)."
options:
  status_path:
    description: The supervisor's status file on the node.
    type: str
    required: true
  timeout_seconds:
    description: Give up after this many seconds (set it past the node's own deadline, grace and cleanup).
    type: int
    required: true
  poll_seconds:
    description: Longest time between two reads of the status file.
    type: int
    default: 15
  progress_dir:
    description: Controller directory for every node's latest status (the summary line reads it).
    type: str
  total_nodes:
    description: Nodes in the run, for the summary line.
    type: int
    default: 1
  total_steps:
    description: Steps each rank will run, when known, for the summary line.
    type: int
  results_file:
    description: A file on the node removed once the run has finished (the results file of a
      M(aorta.cluster.run_supervisor) run under C(async)).
    type: str
  unreachable_polls:
    description: Polls in a row without a connection before the node counts as unreachable.
    type: int
    default: 3
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    support: none
    details: The task is skipped in check mode (nothing was launched).
"""

EXAMPLES = r"""
- name: Wait for every node to finish
  aorta.cluster.run_wait:
    status_path: /var/tmp/aorta-cluster/runs/{{ aorta_run_id_resolved }}.json
    timeout_seconds: 4000
    progress_dir: "{{ aorta_results_dir_resolved }}/.progress"
    total_nodes: "{{ groups['aorta_nodes'] | length }}"
    results_file: "{{ aorta_job.results_file }}"
  register: aorta_wait
"""

RETURN = r"""
status:
  description: The supervisor's last status record (see M(aorta.cluster.run_supervisor)).
  returned: when the node answered
  type: dict
finished:
  description: True when the supervisor said the run has finished.
  returned: always
  type: bool
node_unreachable:
  description:
    - True when the node could not be reached for O(unreachable_polls) polls in a row. Returned as
      data, not as an unreachable host, so the other nodes' waits go on under C(any_errors_fatal).
  returned: when it could not be reached
  type: bool
lost:
  description: Why the supervisor's end was not seen (never started, or not finished in time).
  returned: when it was not seen to finish
  type: str
polls:
  description: Status reads made.
  returned: always
  type: int
"""
