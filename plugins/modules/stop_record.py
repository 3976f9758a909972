#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: stop_record
short_description: Say what a stop by run id did, and add it to the run's run.json when it is at hand
version_added: 0.1.0
description:
  - "The last task of C(playbooks/stop.yml), on the controller, once: reads every node's
    M(aorta.cluster.run_attach) result (registered as C(aorta_stop)): whether the head was asked, and each
    node's supervisor state after the wait."
  - "Prints one line: the run, whether its head was asked, how many nodes' supervisors had finished,
    and the nodes that had not (at most 10 named; the teardown, just before, removed what they left)."
  - "When this controller has the run's results directory (C(aorta_results_dir), else
    C(aorta_results_root)/<run id>) and its C(run.json), appends to its C(stops) list: C(at), C(by)
    (the controller's user, host and process), C(asked_head), C(finished) (a count), C(not_finished)
    (node: state), C(unreachable) (nodes it could not reach: nothing asked of them) and C(not_in_this_stop)
    (nodes a C(--limit) left out of the play: nothing asked of them either), replacing the file atomically."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Says what it found; writes nothing.
"""

EXAMPLES = r"""
- name: Say what the stop did, and add it to run.json
  aorta.cluster.stop_record:
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
line:
  description: The line printed.
  returned: always
  type: str
record:
  description: The entry appended to run.json's C(stops) (also when no run.json was at hand).
  returned: always
  type: dict
run_json:
  description: The run.json that was updated; empty when none was at hand.
  returned: always
  type: str
"""
