# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""combined_traces in the controller's own Python (documented in plugins/modules/combined_traces.py).

Run as a module on localhost it would start a module process with the hosts' ansible_python_interpreter,
which a cluster file's vars often set for every host, implicit localhost included: a path the
controller may not have. The tree is the controller's; so is the Python that writes it.

The run's rank count and every node's collection are read here from the nodes' registered results
when the task leaves them out (plugin_utils/results/_node_results.py), not in Jinja over every node's hostvars.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._combined import ARGUMENT_SPEC, write
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import ControllerTask


class ActionModule(ControllerTask):
    # Both may be left out: from_nodes reads them from the run's nodes.
    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = {
        **ARGUMENT_SPEC,
        "expected_ranks": {"type": "int"},
        "nodes": {"type": "list", "elements": "dict"},
    }
    TASK = staticmethod(write)
    NODE_VARS: tuple[str, ...] = ("aorta_launch", "aorta_end")

    def from_nodes(
        self, task_vars: Mapping[str, Any], nodes: Mapping[str, Any], groups: Mapping[str, Any], given: Collection[str]
    ) -> dict[str, Any]:
        """``expected_ranks``: the nodes that ran (without those preflight excluded) times their ranks
        each (the launch's, else aorta_nproc_per_node or aorta_gpus_per_node). ``nodes``: each ended
        node's ``aorta_end.collect``. A run where no node ended has nothing to collect: skipped."""
        found: dict[str, Any] = {}
        if "nodes" not in given:
            if not _node_results.ended(nodes, groups):
                return {"skipped": "no node of aorta_nodes ended (aorta.cluster.node_end): nothing to collect"}
            found["nodes"] = _node_results.collected_nodes(nodes, groups)
            if not found["nodes"]:
                return {"skipped": "no node's traces were collected or listed (aorta_collect_traces none)"}
        if "expected_ranks" not in given:
            found["expected_ranks"] = _node_results.expected_ranks(
                nodes,
                groups,
                self._variable(task_vars, "aorta_nproc_per_node"),
                self._variable(task_vars, "aorta_gpus_per_node"),
            )
            if found["expected_ranks"] is None:
                return {
                    "failed": "expected_ranks: not given, and no launch nor aorta_gpus_per_node gives ranks per node"
                }
        return found
