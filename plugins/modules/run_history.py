#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_history
short_description: Rebuild the history of runs (index.json, index.html) of a results root
version_added: 0.1.0
description:
  - "Reads every C(run.json) one level under O(root) (each run's results directory) with its report
    and writes C(index.json) and C(index.html) there, under the history's lock, each replaced
    atomically: one row per run, newest first, and per cluster fingerprint a trend of step time and
    throughput as inline SVG. Every C(campaign.json) one level under O(root) (a scaling campaign's
    directory) adds a row under C(campaigns), listed above the runs."
  - "Every run adds its own row at its end (M(aorta.cluster.run_outcome)); this rebuilds the whole
    history, after runs were moved or for runs older than the history. C(playbooks/run_history.yml)
    runs it on C(aorta_results_root)."
options:
  root:
    description: The results root (the parent of each run's results directory).
    type: path
    required: true
  ignore:
    description:
      - Dotted Aorta config keys (or prefixes ending in C(.*)) left out of the fingerprint, as C(aorta_baseline_ignore).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Checks the root; writes nothing.
"""

EXAMPLES = r"""
- name: Rebuild the history of every run under the results root
  aorta.cluster.run_history:
    root: "{{ aorta_results_root }}"
    ignore: "{{ aorta_baseline_ignore }}"
"""

RETURN = r"""
root:
  description: The results root, absolute.
  returned: always
  type: str
runs:
  description: The runs in the history.
  returned: when not in check mode
  type: int
campaigns:
  description: The scaling campaigns in the history.
  returned: when not in check mode
  type: int
index_html:
  description: The history page.
  returned: when not in check mode
  type: str
index_json:
  description: The history's data.
  returned: when not in check mode
  type: str
"""
