# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: pull_plan
short_description: The nodes whose traces to pull after a sampled run's report, each with why
version_added: 0.1.0
author:
  - aorta.cluster maintainers (@aorta-cluster)
description:
  - "After a run with C(aorta_collect_traces) V(sample): reads the run's C(combined_traces/manifest.json)
    and C(aorta_benchmark_report.json) (in C(aorta_report_dir) when set, else C(aorta_results_dir_resolved))
    and returns, in order, the nodes
    whose traces still lie on their node to pull now (M(aorta.cluster.trace_pull)): every node the report
    names (slow nodes, the slow ranks' nodes, slow links), the next node in rank order after each
    (wrapping to the head), and C(aorta_collect_sample_nodes) more drawn at random with the seed the
    report states (from the run id), while the files' sizes as the nodes listed them stay within
    C(aorta_collect_budget_gb)."
  - "With terms (node names or node ranks: C(playbooks/trace_collect.yml)'s C(aorta_collect_nodes)): those
    nodes, whatever their size; a term that names no node the manifest lists C(on_node) fails the lookup,
    naming it and why."
  - "Empty when the run was not sampled (no node's traces were left on it) or has no manifest."
  - The plan is computed here, in the controller's Python (plugins/plugin_utils/collect/_collect_plan.py), not in Jinja.
options:
  _terms:
    description: Nodes asked for by name or rank; none means the plan after the report.
    required: false
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Pull the traces the report names and a sample
  aorta.cluster.trace_pull:
    node: "{{ item.node }}"
    why: "{{ item.why }}"
  delegate_to: "{{ item.node }}"
  loop: "{{ lookup('aorta.cluster.pull_plan', wantlist=True) }}"
"""

RETURN = r"""
_raw:
  description: One entry per node to pull, most wanted first - C(node), C(rank), C(why), C(bytes).
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS

display = Display()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        variables = variables or {}
        results_dir = str(self._value(variables, "aorta_results_dir_resolved") or "")
        if not results_dir:
            raise AnsibleLookupError("pull_plan: aorta_results_dir_resolved is not set (the run's results directory)")
        manifest = read_json_object(os.path.join(results_dir, "combined_traces", "manifest.json"))
        if manifest is None:
            return []
        # The report's folder: aorta_report_dir when set (trace_parse writes there), else the run's.
        report_dir = str(self._value(variables, "aorta_report_dir") or "") or results_dir
        report = read_json_object(os.path.join(report_dir, "aorta_benchmark_report.json")) or {}
        try:
            plan = _collect_plan.pull_plan(
                manifest,
                report,
                int(self._value(variables, "aorta_collect_sample_nodes")),
                _collect_plan.seed_of(str(manifest.get("run_id") or "")),
                int(float(self._value(variables, "aorta_collect_budget_gb")) * 1e9),
                asked=[str(term) for term in terms] if terms else None,
            )
        except (TypeError, ValueError) as exc:
            raise AnsibleLookupError(f"pull_plan: {exc}") from None
        if terms and plan["left"]:
            # Nodes asked for by name or rank: each that cannot be pulled is the play's failure.
            shown = "; ".join(f"{item['node']} ({item['left']})" for item in plan["left"])
            raise AnsibleLookupError(f"aorta_collect_nodes: not pulled: {shown}")
        if plan["left"]:
            # One line whatever their number: the first three, then a count.
            shown = "; ".join(f"{item['node']} ({item['left']})" for item in plan["left"][:3])
            more = f" and {len(plan['left']) - 3} more" if len(plan["left"]) > 3 else ""
            display.display(f"aorta: not pulled, left on their nodes: {shown}{more}")
        return plan["pull"]

    def _value(self, variables, name):
        """``name`` templated from the play's variables, else the collection's default."""
        if name not in variables:
            return DEFAULTS.get(name)
        return self._templar.template(variables[name])
