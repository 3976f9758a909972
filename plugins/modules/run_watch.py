#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_watch
short_description: Watch the whole run from the head's aggregate, one command per poll
version_added: 0.1.0
description:
  - "Run once, on the head: reads the aggregate that the head's M(aorta.cluster.run_supervisor)
    keeps (every node's last report, the stop and the nodes gone silent) and the head's own status,
    in one remote command per poll whatever the node count (a long poll that returns as soon as the
    head has finished), and prints one progress line for every node per poll."
  - "Once the user interrupted ansible-playbook (the first Ctrl-C or SIGTERM: the lookup
    aorta.cluster.interrupts), the next poll first writes the head's stop request
    (C(aggregates/<run_id>.stop) beside the aggregate; one command, once); the head's aggregator
    then stops every node, and the watch goes on until they have ended. The result's
    C(stop_requested) holds the request."
  - "The head's supervisor finishes only once every node has ended or gone silent, so its status
    saying C(finished) is the end of the run. The head's status is kept in O(progress_dir) under the
    head's name, where each node's M(aorta.cluster.run_wait) finds the nodes the head counts as gone."
  - "When the head cannot be read for O(unreachable_polls) polls in a row, C(head_lost) is returned;
    each node's M(aorta.cluster.run_wait) then reads the nodes one by one."
options:
  status_path:
    description: The head's supervisor status file.
    type: str
    required: true
  aggregate_path:
    description: The head's aggregate, C(aggregates/<run_id>.json) in the supervisor's directory.
    type: str
    required: true
  head:
    description: The head's name, for its kept status.
    type: str
  timeout_seconds:
    description: Give up after this many seconds (past the head's own deadline, grace, cleanup and wait for the others).
    type: int
    required: true
  poll_seconds:
    description: Longest time between two reads.
    type: int
    default: 15
  progress_dir:
    description: Controller directory where the head's latest status is kept.
    type: str
  total_nodes:
    description: Nodes in the run, for the progress line.
    type: int
    default: 1
  total_steps:
    description: Steps each rank will run, when known, for the progress line.
    type: int
  unreachable_polls:
    description: Polls in a row without a connection before the head counts as lost.
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
- name: Watch every node from the head
  aorta.cluster.run_watch:
    status_path: /var/tmp/aorta-cluster/runs/{{ aorta_run_id_resolved }}.json
    aggregate_path: /var/tmp/aorta-cluster/aggregates/{{ aorta_run_id_resolved }}.json
    timeout_seconds: 4000
    total_nodes: "{{ groups['aorta_nodes'] | length }}"
  delegate_to: "{{ groups['aorta_head'][0] }}"
  run_once: true
  register: aorta_watch
"""

RETURN = r"""
stop_requested:
  description:
    - The user's stop request the watch passed on to the head (C(at), C(signal), C(reason), C(phase)).
  returned: when the user interrupted ansible-playbook during the watch
  type: dict
finished:
  description: True when the head's supervisor said it has finished (every node ended or gone silent).
  returned: always
  type: bool
aggregate:
  description:
    - The head's last aggregate. Keys C(run_id), C(head), C(nodes) (per node C(seen), C(silent_s), C(state),
      C(finished), C(outcome), C(rc), C(reason), C(progress), C(disk_free)), C(stop) (C(node), C(kind),
      C(reason), C(after_s)), C(silent) (node to why), C(settled), C(refused) (messages refused, by kind) and
      C(elapsed_s).
  returned: when the head answered
  type: dict
status:
  description: The head's supervisor status record (see M(aorta.cluster.run_supervisor)).
  returned: when the head answered
  type: dict
head_lost:
  description: True when the head could not be reached for O(unreachable_polls) polls in a row.
  returned: when it could not be reached
  type: bool
lost:
  description: Why the run's end was not seen.
  returned: when it was not seen to finish
  type: str
polls:
  description: Reads made (one remote command each).
  returned: always
  type: int
"""
