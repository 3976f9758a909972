#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_start
short_description: Fix the run's id, start time and results directory on the controller
version_added: 0.1.0
description:
  - "Returns the values every later play reads, which the role C(aorta.cluster.run_context) keeps with
    M(ansible.builtin.set_fact): C(aorta_run_id_resolved) (C(aorta_run_id), else the UTC
    start time and 6 random hex digits), C(aorta_run_started_epoch) and C(aorta_results_dir_resolved)
    (C(aorta_results_dir), else C(aorta_results_root)/<run id>, C(aorta_results_root) defaulting to
    C(aorta_results); a relative path is taken from the directory ansible-playbook runs in)."
  - Creates the results directory and its C(logs/) (mode 0755) in the controller's own Python, with no
    module process.
  - "Fails with one line naming C(aorta_run_id) when the id holds anything but letters, digits, C(.),
    C(_) and C(-) (64 at most): it goes into container names and paths."
  - "With O(purpose=run) (a run given C(aorta_run_id)) and O(purpose=watch) (a watch re-attached by run id,
    C(playbooks/watch.yml)), refuses a run whose results directory already holds its C(run.json): that run
    has ended and been recorded, and no second record is written over it (not even C(variables.json)).
    The line names the run's status and the commands that serve instead."
  - "With O(purpose=collect) (C(playbooks/trace_collect.yml)), a recorded run is collected again into its
    own results directory; its C(variables.json) is kept as the run wrote it."
options:
  purpose:
    description:
      - V(run) for a run's own play, V(watch) for a watch re-attached to a run by its id, V(collect) for a
        collection of a run's files again.
    type: str
    choices: [run, watch, collect]
    default: run
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Fixes the values and creates nothing.
"""

EXAMPLES = r"""
- name: Fix the run id and results directory
  aorta.cluster.run_start:
"""

RETURN = r"""
aorta_run_id_resolved:
  description: The run's id.
  returned: success
  type: str
  sample: 20261203T101500-a1b2c3
aorta_run_started_epoch:
  description: When the run started, epoch seconds.
  returned: success
  type: int
aorta_results_dir_resolved:
  description: The run's results directory, absolute.
  returned: success
  type: str
  sample: /home/me/aorta_results/20261203T101500-a1b2c3
aorta_rank_order:
  description:
    - The group C(aorta_nodes) sorted by each node's C(aorta_node_rank), computed once for the run; the
      node steps read it instead of every node's variables.
  returned: success
  type: list
  elements: str
  sample: [node-a, node-b]
aorta_results_dir_made:
  description:
    - True when this task made the results directory (it was not there before); a collection of an id
      no node holds removes the directory it made (playbooks/trace_collect.yml), never one it found.
  returned: success
  type: bool
variables_file:
  description:
    - "C(variables.json) in the results directory: every aorta_* variable the run uses, as templated
      (from -e, the inventory, a CVS file and the defaults), values under a secret-looking name
      (token, secret, password, key) masked. Empty when it could not be written (a warning says why)."
  returned: success, not in check mode
  type: str
"""
