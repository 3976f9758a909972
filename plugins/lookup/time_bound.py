# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: time_bound
short_description: A playbook task's time bound, derived from the run's aorta_* variables
version_added: 0.1.0
author:
  - aorta.cluster maintainers (@aorta-cluster)
description:
  - "Returns the seconds one task of the playbook C(aorta.cluster.aorta_multinode) may take, derived from the
    C(aorta_*) variables of the host the task runs for, by the same arithmetic the collection's plugins
    use on the controller and on the nodes (C(plugins/module_utils/node_runtime/_time_bounds.py)): a bound changed
    there moves the task timeouts with it, and no copy of it in a playbook can disagree."
  - "V(prepare): the preflight task's C(timeout), C(aorta_connect_timeout) + C(aorta_fabric_check_timeout)
    + 300, plus twice the health checks' bound (6 x C(aorta_health_step_timeout) + 30: every node's own
    checks at once, then a worker's again where its lease stopped another run's leftovers) when
    C(aorta_health_checks) is on. The probe bounds its own wait for the head below it."
  - "V(launch): the launch task's C(timeout), C(aorta_setup_timeout_seconds) + 120 (a pull or load may take
    the whole setup timeout). The nodes' supervisors wait for every node to join as long, at most the run's
    deadline."
  - "V(watch), V(end): how long the controller's wait for the run's end goes on, the head's watch
    (O(aorta.cluster.run_watch#module:timeout_seconds)) and each node's end (M(aorta.cluster.node_end)):
    the run's deadline, the supervisor's own stop (diagnostics, SIGTERM,
    C(aorta_kill_grace_seconds), SIGKILL, cleanup), the head serving the others, and 60 s. Not a task
    C(timeout): the wait gives up there itself and says so, where a task timeout would lose the run's record."
  - An unknown task name, a variable that is not set or not a whole number fails with one line naming it.
options:
  _terms:
    description: The tasks whose bound is returned, each one of V(prepare), V(launch), V(watch), V(end).
    required: true
    type: list
    elements: str
notes:
  - The variables are the task's host's, templated; the role M(aorta.cluster.defaults) gives each its default.
"""

EXAMPLES = r"""
- name: Probe every node, hold it for this run and prove the fabric
  aorta.cluster.node_prepare:
  timeout: "{{ lookup('aorta.cluster.time_bound', 'prepare') }}"

- name: Launch on every node at once
  aorta.cluster.node_launch:
  timeout: "{{ lookup('aorta.cluster.time_bound', 'launch') }}"

- name: Say how long the run's end is waited for
  ansible.builtin.debug:
    msg: "{{ lookup('aorta.cluster.time_bound', 'watch') }} s"
"""

RETURN = r"""
_raw:
  description: Seconds, one whole number per term, in the order asked.
  type: list
  elements: int
"""

from ansible.errors import AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds

FLAGS = ("aorta_health_checks",)  # booleans as Ansible reads them ("yes", "false", ...), not Python's truth


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        bounds = []
        for term in terms:
            task = str(term)
            if task not in _time_bounds.TASK_VARIABLES:
                raise AnsibleLookupError(
                    f"time_bound: no task named {task!r}: one of {', '.join(_time_bounds.TASK_VARIABLES)}"
                )
            values = {}
            for name in _time_bounds.TASK_VARIABLES[task]:
                if name not in variables:
                    raise AnsibleLookupError(
                        f"time_bound: {name} is not set; the play lists the role aorta.cluster.defaults"
                    )
                value = self._templar.template(variables[name]) if self._templar else variables[name]
                values[name] = boolean(value, strict=False) if name in FLAGS else value
            try:
                bounds.append(_time_bounds.task_timeout(task, values))
            except _time_bounds.BoundError as exc:
                raise AnsibleLookupError(f"time_bound: {exc}") from None
        return bounds
