#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: check_variables
short_description: Refuse bad aorta_* values before anything touches a node
version_added: 0.1.0
description:
  - "Checks the ranges and shapes of the variables users set, as the controller sees them: deadlines
    and counts above zero, ports from 1024 to 65535, C(aorta_output_dir) a relative path that stays
    under C(aorta_path) (it is joined to it for packing, hand-back and deletion), absolute
    C(aorta_path) and C(aorta_lease_dir), environment names a shell accepts, override keys, a
    non-empty C(aorta_docker_image), a C(aorta_straggler_threshold) above 0."
  - "First, that the job holds every node of the cluster file: a C(--limit) or an AWX sliced job
    holds only some, and each part would rendezvous alone and hang until its deadline. That fails
    alone, in one line."
  - Fails with one line per bad variable, naming it and its value. Variables not set are not judged
    (the defaults are valid); one that cannot be templated yet is left to the roles.
  - "Refuses every C(aorta_*) name that this collection neither documents (C(roles/variables.yml),
    docs/variables.md) nor sets itself, found in the extra vars, the play's variables or the host and
    group variables of any node of C(aorta_nodes), with the nearest documented name: a misspelt
    C(aorta_timout_seconds) would otherwise run with the default deadline. Only variable names are
    read: nothing is templated and no node is contacted. A site's own C(aorta_*) names (or shell-style
    patterns) go in C(aorta_site_variables)."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: It only reads variables.
"""

EXAMPLES = r"""
- name: Check every aorta_* variable before anything touches a node
  aorta.cluster.check_variables:
"""

RETURN = r"""
checked:
  description: The variables that were set and checked.
  returned: always
  type: list
  elements: str
errors:
  description: One line per bad variable.
  returned: always
  type: list
  elements: str
  sample:
    - "aorta_output_dir: '../../etc' must stay under aorta_path (a relative path that does not climb out with '..')"
    - "aorta_timout_seconds (extra vars) is not a variable of aorta.cluster; did you mean aorta_timeout_seconds?
      (a site's own aorta_* names go in aorta_site_variables)"
"""
