# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The partial_cluster filter; its documentation lives in the sidecar ``partial_cluster.yml`` beside this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import (
    partial_cluster as _partial_cluster,
)


def partial_cluster(selected, total=None):
    """Why a job that sees ``selected`` of the cluster file's ``total`` nodes must not start, or ''."""
    try:
        return _partial_cluster(selected, total)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"partial_cluster: node counts must be integers ({exc})") from None


class FilterModule:
    def filters(self):
        return {"partial_cluster": partial_cluster}
