#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_record
short_description: Write the run's run.json, its health files and its end lines, once, on the controller
version_added: 0.1.0
description:
  - "Run once on the controller after every node's end (or from the launch play's rescue when setup
    stopped). Reads the run's variables itself: every node of the group C(aorta_nodes) once (its
    C(aorta_node_rank), C(aorta_mgmt_ip), C(aorta_vpc_ip), C(aorta_cluster_file) and the results of
    M(aorta.cluster.node_prepare), M(aorta.cluster.node_launch) and M(aorta.cluster.node_end)
    registered as C(aorta_prepare), C(aorta_launch), C(aorta_end), with the rescue's failed task name
    and result C(aorta_node_setup_task) and C(aorta_node_setup_result)), and on localhost
    C(aorta_combined) (M(aorta.cluster.combined_traces)) and C(aorta_collect_failure). Setup stopped
    when a node holds C(aorta_node_setup_task) (the launch play's rescue sets it on every node it
    reaches)."
  - "The run's head is the one the launch chose (the first node's C(aorta_launch.head); with
    C(aorta_exclude_unhealthy), the first node that passed preflight), else the first node; its
    launch gives the ranks per node, the node count, the rendezvous and the nodes preflight excluded."
  - "Makes a row per node (what preflight found, under what node_end recorded; a node that never ended
    is C(not_started)), judges the nodes' health together (fingerprint drift, the nodes whose own
    preflight failed), decides the run's status (FAILED when setup stopped, with
    C(aorta_run_failure_message) and C(aorta_run_failure_nodes) when given, else what each node's
    rescue kept: every node whose own task failed, the first one's reason; else from the rows), says why it stopped as
    M(aorta.cluster.run_diagnosis) does, and fixes the run's context (image, config, overrides, launch
    mode, node and rank counts, batch size and sequence length)."
  - "Writes C(run.json) (mode 0644), C(unhealthy.txt) (every run, empty when every node is healthy)
    and, when the nodes came from a cluster file, C(healthy.cluster.json) without the unhealthy nodes,
    both mode 0600 from their first byte: C(healthy.cluster.json) may hold the SSH password. The
    result holds neither file's content, so the task needs no C(no_log); a health file that cannot be
    written is a warning naming the file, after C(run.json) is written."
  - "Returns the run's status, its diagnosis, the lines to print (M(aorta.cluster.say)) and the AWX
    statistics in C(ansible_stats), which ansible-playbook takes from any task's result as from
    M(ansible.builtin.set_stats)'s (once for the play, aggregated): no C(set_stats) task is needed."
options: {}
notes:
  - The role C(aorta.cluster.run_record) runs it, registers its result as C(aorta_run_record) and prints
    its C(lines).
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Computes and returns everything, writes no file.
"""

EXAMPLES = r"""
- name: Write run.json, the health files and the AWX stats
  aorta.cluster.run_record:
  register: aorta_run_record

- name: Show the run and the nodes that were not ok
  aorta.cluster.say:
    msg: "{{ aorta_run_record.lines }}"

- name: Fail the play unless every node completed
  ansible.builtin.fail:
    msg: "{{ aorta_run_record.status.message }}"
  when: aorta_run_record.status.status != 'COMPLETED'
"""

RETURN = r"""
status:
  description: The run's status, as C(run.json) holds it.
  returned: always
  type: dict
  contains:
    status:
      description: V(COMPLETED) (every node that ran was ok), V(TIMEOUT) (a node timed out) or V(FAILED).
      type: str
      sample: COMPLETED
    message:
      description: One line naming the nodes that were not ok, the one where the trouble started first.
      type: str
      sample: all 2 nodes completed
    failed_nodes:
      description: The nodes that were not ok, where the trouble most likely started first.
      type: list
      elements: str
    first_failure:
      description: The first of RV(status.failed_nodes), null when none.
      type: str
diagnosis:
  description:
    - Why the run stopped, as C(run.json)'s C(diagnosis) (see M(aorta.cluster.run_diagnosis)); its
      C(summary) is one line. M(aorta.cluster.trace_parse) shows it first in the report.
  returned: always
  type: dict
lines:
  description:
    - "What the run prints at its end: C(run <id>: <status> - <message>), C(why: <diagnosis>) unless
      the run completed without node errors, a line per node that was not ok (every node with C(-v))
      and one of counts, the fingerprint drift, where the unhealthy nodes are listed, and the results
      directory."
  returned: always
  type: list
  elements: str
run_json:
  description: The path of C(run.json).
  returned: always
  type: str
  sample: /home/me/aorta_results/20261202T042624-2c3ca6/run.json
files:
  description: The files written beside C(run.json) (C(unhealthy.txt), C(healthy.cluster.json)).
  returned: when not in check mode
  type: list
  elements: str
ansible_stats:
  description:
    - "For AWX, as M(ansible.builtin.set_stats) returns it (C(per_host=false), C(aggregate=true)):
      C(aorta_run_id), C(aorta_run_status), C(aorta_failed_nodes), C(aorta_excluded_nodes),
      C(aorta_diagnosis), C(aorta_results_dir), C(aorta_run_json) and C(aorta_manifest) (empty unless
      this run's collection wrote the combined tree)."
  returned: always
  type: dict
"""
