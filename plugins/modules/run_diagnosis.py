#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_diagnosis
short_description: Say why a run stopped - which rank, which collective, which line - from the collected evidence
version_added: 0.1.0
description:
  - "Runs on the controller, after trace collection. For a TIMEOUT it reads every rank's py-spy stack
    and flight-recorder dump that the nodes' supervisors captured at the deadline (collected under
    C(combined_traces/node_<r>/diagnostics/node_<r>/)) and names the ranks the others wait for: in
    a process group, the ranks whose last collective is the lowest; without dumps, the ranks with
    the fewest steps, else the ranks stuck where the others are not."
  - "For a FAILED run it names the rank torchrun reports as the root cause (a node whose ranks died
    of a peer's failure yields to that peer), with the exception and the innermost user-code frame
    from that node's log."
  - "For every outcome it lists each node's kernel-log trouble that the supervisors found."
  - Missing or unreadable evidence narrows the answer (C(problems)); it never fails the task.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  results_dir:
    description: The run's results directory on the controller (C(combined_traces/), C(logs/)).
    type: path
    required: true
  status:
    description: The run's status.
    type: str
    choices: [COMPLETED, FAILED, TIMEOUT]
    required: true
  nodes:
    description:
      - The nodes' records as in run.json (C(name), C(rank), C(progress), C(failure)), with
        C(node_errors), C(capture_s) and C(capture_note) from the supervisors.
    type: list
    elements: dict
    required: true
  nproc_per_node:
    description: Ranks per node (node rank R holds global ranks R x nproc to R x nproc + nproc - 1).
    type: int
    required: true
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Reads files only.
  diff_mode:
    support: none
  action:
    description: Runs on the controller, in an action plugin.
    support: full
"""

EXAMPLES = r"""
- name: Say why the run stopped
  aorta.cluster.run_diagnosis:
    results_dir: "{{ aorta_results_dir_resolved }}"
    status: "{{ aorta_run_status.status }}"
    nodes: "{{ aorta_run_nodes }}"
    nproc_per_node: 8
  register: aorta_diagnosis
"""

RETURN = r"""
diagnosis:
  description:
    - "C(kind) (V(hang), V(failure) or V(none)), C(behind) (per rank C(rank), C(node), C(frame), and
      C(last_op), C(seq), C(stuck_in) for a hang or C(exception), C(message) for a failure),
      C(waiting) (for example V(ranks 0, 2, 3 in gloo:broadcast #5)), C(method), C(evidence) (paths
      under the results directory), C(problems), C(node_errors), C(capture), C(summary) (one line)."
  returned: always
  type: dict
"""
