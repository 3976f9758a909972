#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: say
short_description: Print the run's own console lines, whatever the callback hides
version_added: 0.1.0
description:
  - Prints each line of O(msg) on the console as it is, one line each (no C(ok:) wrapper, no JSON quoting).
  - "The project's C(ansible.cfg) and the execution environment hide C(ok) results
    (C(display_ok_hosts=false)), so that a healthy run prints no line per node and task;
    M(ansible.builtin.debug) would be hidden with them. The run's few lines (where its results go,
    the end table, the report's headline) go through this instead."
options:
  msg:
    description: A line, several lines in one string, or a list of lines; empty lines are left out.
    type: raw
    required: true
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: It only prints.
"""

EXAMPLES = r"""
- name: Say where this run's results go
  aorta.cluster.say:
    msg: "run {{ aorta_run_id_resolved }}; results in {{ aorta_results_dir_resolved }}"
"""

RETURN = r"""
lines:
  description: The lines printed.
  returned: always
  type: list
  elements: str
"""
