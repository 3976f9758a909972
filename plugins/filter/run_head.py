# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run_head filter; its documentation lives in the sidecar ``run_head.yml`` beside this one."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import GROUP_ALL
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import run_head as _run_head


def run_head(groups, hostvars=None):
    """The run's head (plugin_utils/launch/_plan.py's ``run_head``): the one the launch elected, as
    the first node's ``aorta_launch`` records it, else the cluster file's."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("run_head: give it the play's groups: {{ groups | aorta.cluster.run_head(hostvars) }}")
    nodes = list(groups.get(GROUP_ALL) or [])
    launch = None
    if nodes and hostvars is not None and nodes[0] in hostvars:
        found = hostvars[nodes[0]].get("aorta_launch")
        launch = found if isinstance(found, Mapping) else None
    head = _run_head(groups, launch)
    if not head:
        raise AnsibleFilterError("run_head: the play's groups have no aorta_head and no aorta_nodes")
    return head


class FilterModule:
    def filters(self):
        return {"run_head": run_head}
