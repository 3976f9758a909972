# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_hosts
short_description: The nodes of a CVS cluster.json, in rank order, ready for add_host
version_added: 0.1.0
author:
  - aorta.cluster maintainers (@aorta-cluster)
description:
  - Reads and validates a CVS C(cluster.json) exactly as the M(aorta.cluster.cluster_json) inventory
    plugin does and returns one record per node in rank order, so a play can build the inventory
    with M(ansible.builtin.add_host) when the cluster file arrives as an extra variable (an AWX survey
    answer) instead of an inventory source.
  - "Each record: C(name), C(groups) (C(aorta_nodes) and C(aorta_head) or C(aorta_workers)), C(vars)
    (the host variables the inventory plugin sets, with the C(aorta_nodes) group variables merged in)
    and C(extra) (the node entry's other keys)."
  - An invalid file fails with one line naming the file and the key.
options:
  _terms:
    description:
      - Path of the cluster file; a relative path is taken from the working directory (in AWX, the
        project directory).
    required: true
    type: list
    elements: str
  connection_vars:
    description:
      - Include C(ansible_user) and C(ansible_ssh_private_key_file) or C(ansible_password).
      - V(false) where an AWX Machine credential supplies the connection.
    type: bool
    default: true
notes:
  - The records may hold the cluster file's SSH password; use them in tasks with C(no_log).
"""

EXAMPLES = r"""
- name: Add the cluster's nodes
  ansible.builtin.add_host:
    name: "{{ item.name }}"
    groups: "{{ item.groups }}"
    ansible_host: "{{ item.vars.ansible_host }}"
    aorta_node_rank: "{{ item.vars.aorta_node_rank }}"
    aorta_vpc_ip: "{{ item.vars.aorta_vpc_ip }}"
  loop: "{{ query('aorta.cluster.cluster_hosts', aorta_cluster_file, connection_vars=false) }}"
  no_log: true
"""

RETURN = r"""
_list:
  description: One record per node, in rank order (rank 0 = head).
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _cluster_file


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        records = []
        for term in terms:
            # The working directory, as for any path on the command line; AWX runs jobs from the
            # project directory, so a survey answer names a file in the project.
            path = os.path.abspath(os.path.expanduser(term))
            try:
                cluster = _cluster_file.read(path)
            except _cluster_file.ClusterFileError as exc:
                raise AnsibleLookupError(str(exc)) from None
            for note in cluster.notes:  # once per note: Ansible shows a repeated warning once
                Display().warning(note)
            shared = _cluster_file.group_vars(cluster)
            for record in _cluster_file.host_records(cluster, self.get_option("connection_vars")):
                record["vars"] = {**record["vars"], **shared}
                records.append(record)
        # Cluster-file values are data, never templates.
        return wrap_var(records)
