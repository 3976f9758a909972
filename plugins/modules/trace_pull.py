#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trace_pull
short_description: Pull into a run's combined_traces the traces of one node that the manifest lists on_node
version_added: 0.1.0
description:
  - "After a run with C(aorta_collect_traces) V(sample), each node's traces but the head's stay where
    they are, listed in C(combined_traces/manifest.json) as C(on_node) with every file's path, size
    and sha256. This action, delegated to one such node, streams its files over that node's own
    connection (as M(aorta.cluster.node_end) does; packed and fetched where the connection is not
    ssh), checks them as they arrive, checks them against the manifest's listing (nothing changed on
    the node since the run), moves them into C(combined_traces/node_<rank>/) and marks the node
    collected in the manifest, rewritten atomically under a lock."
  - "The play runs it in one task after the report, looping over the nodes of the lookup
    M(aorta.cluster.pull_plan) (named by the report, the next after each, a seeded sample, within
    C(aorta_collect_budget_gb)); C(playbooks/trace_collect.yml) runs it for the nodes of
    C(aorta_collect_nodes)."
  - A node already collected is left as it is (not changed).
  - Runs in the controller's Python (an action plugin); the node runs only the packing script.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  node:
    description: The node's inventory name, as the manifest names it (the task is delegated to it).
    type: str
    required: true
  why:
    description: Why it is pulled, recorded in its manifest row (C(pulled.why)).
    type: str
    default: asked
  traces_dir:
    description: The run's combined_traces; empty means C(<aorta_results_dir_resolved>/combined_traces).
    type: path
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Nothing is pulled in check mode.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Pull the traces the report names and a sample
  aorta.cluster.trace_pull:
    node: "{{ item.node }}"
    why: "{{ item.why }}"
  delegate_to: "{{ item.node }}"
  loop: "{{ lookup('aorta.cluster.pull_plan', wantlist=True) }}"
  loop_control:
    label: "{{ item.node }}: {{ item.why }}"
"""

RETURN = r"""
node:
  description: The node pulled.
  returned: always
  type: str
rank:
  description: Its node rank (its directory is C(node_<rank>)).
  returned: when the manifest holds the node
  type: int
files:
  description: How many files arrived and were verified.
  returned: when pulled
  type: int
bytes:
  description: Their size.
  returned: when pulled
  type: int
seconds:
  description: How long the pull took.
  returned: when pulled
  type: float
"""
