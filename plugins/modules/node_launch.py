#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: node_launch
short_description: One node's launch in one task, its supervisor detached
version_added: 0.1.0
description:
  - "Refuses, launching nothing, once the user interrupted ansible-playbook (the first Ctrl-C or SIGTERM:
    the lookup aorta.cluster.interrupts): the launch play's rescue then tears down what preflight holds."
  - "Builds the node's plan in the controller's Python (plugin_utils/launch/_plan.py C(node_launch)): container
    name, run and diagnostics directories, C(docker run) argv, launch mode, rendezvous (the head's fabric
    address and the port its M(aorta.cluster.node_prepare) picked), nproc, deadlines, the torchrun argv
    with one C(--override) group, the environment and the launch script."
  - "Then, on the node: pulls the image or loads it from C(aorta_image_archive) where preflight found it
    missing; copies py-spy where missing; then in one module run, M(aorta.cluster.run_supervisor) with
    O(aorta.cluster.run_supervisor#module:start) and O(aorta.cluster.run_supervisor#module:detach),
    starts the container (and the build step) and the node's supervisor in a process of its own, so the
    node keeps the deadline, the stop and the cleanup whatever happens to the controller. The run's
    secret (the aggregator's HMAC key) reaches only that module's no_log option."
  - "With C(--check) or C(-v), prints each node's row: rendezvous, argv, environment and C(docker run)
    line. On the head, prints the preflight's one line for the whole cluster."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Prints the plan and changes nothing.
"""

EXAMPLES = r"""
- name: Launch on every node at once
  aorta.cluster.node_launch:
  register: aorta_launch
  timeout: 1920
"""

RETURN = r"""
details:
  description:
    - "A failure whose console line would reach 300 characters is kept whole in C(logs/<node>.launch.json) of the
      results directory (mode 0600: the plan holds the environment), named here relative to it; the result then holds
      only C(failed), C(changed), C(msg) (one line, cut to fit) and this. run_record reads the file back. Not under
      check mode."
  returned: on a long failure
  type: str
  sample: logs/gpu-node-07.launch.json
container:
  description: The run's container on the node.
  returned: always
  type: str
launch_mode:
  description: C(torchrun) or C(script).
  returned: always
  type: str
run_dir:
  description: The node's run directory (launch script, node.log).
  returned: always
  type: str
collect_dir:
  description: Where script mode's experiment script writes, relative to aorta_path (null in torchrun mode).
  returned: always
  type: str
nproc:
  description: Ranks on each node.
  returned: always
  type: int
master_addr:
  description: The rendezvous address.
  returned: always
  type: str
master_port:
  description: The rendezvous port.
  returned: always
  type: int
deadlines:
  description: Every time bound of the run, in seconds, as plugins/module_utils/node_runtime/_time_bounds.py
    derives them from the run's deadlines.
  returned: always
  type: dict
total_steps:
  description: C(training.max_steps) from C(aorta_training_overrides) in whatever form they were given (an AWX survey's
    text too), for the watch's progress line; null when not set.
  returned: always
  type: raw
started:
  description: The container's C(start_floor) and C(container_id).
  returned: when the container started
  type: dict
job:
  description: The detached supervisor on the node (C(pid), C(status_path)).
  returned: when the supervisor started
  type: dict
"""
