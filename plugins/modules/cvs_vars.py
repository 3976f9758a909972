#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: cvs_vars
short_description: Map a CVS aorta_benchmark.yaml onto the aorta_* variables, in a file for include_vars
version_added: 0.1.0
description:
  - Reads an AMD CVS C(aorta_benchmark.yaml), maps each key onto its C(aorta_*) variable (the CVS key
    of each variable is in C(docs/variables.md)) and writes the variables to a scratch file on the
    controller, for M(ansible.builtin.include_vars).
  - An unknown key fails the task naming the file and the key; keys CVS has that this collection does
    not use are accepted and said on the console, one line each, with the reason.
  - C(aorta_multinode.yml) runs it once when O(src) is given as C(aorta_cvs_config); command-line
    C(-e) still wins over the mapped values.
options:
  src:
    description: The CVS file; a relative path is looked up as M(ansible.builtin.copy) looks up its C(src)
      (the playbook's C(files/) and directory, then the working directory).
    type: path
    required: true
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: The scratch file is written in check mode too, so that the check run reads the same variables.
"""

EXAMPLES = r"""
- name: Map a CVS aorta_benchmark.yaml onto aorta_* variables
  aorta.cluster.cvs_vars:
    src: aorta_benchmark.yaml
  register: aorta_cvs_vars_file

- name: Use them (command-line -e still wins)
  ansible.builtin.include_vars:
    file: "{{ aorta_cvs_vars_file.path }}"
"""

RETURN = r"""
path:
  description: The scratch file holding the mapped variables (YAML, mode 0600).
  returned: success
  type: str
names:
  description: The variables the file sets.
  returned: success
  type: list
  elements: str
not_used:
  description: The CVS keys accepted but not used, each with why.
  returned: success
  type: list
  elements: str
"""
