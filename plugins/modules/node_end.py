#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: node_end
short_description: One node's end in one task - outcome, log, teardown, traces
version_added: 0.1.0
description:
  - "Reads the node's end as its supervisor recorded it (as M(aorta.cluster.run_wait) does: one read when
    M(aorta.cluster.run_watch) saw the run end; polls when the head was lost), and makes the node's row
    of run.json (C(node_result))."
  - "Saves the node's log under the results directory's C(logs/), removes this run's containers and
    releases the lease with M(aorta.cluster.node_lease) (the backstop: the supervisor does it when it
    ends), packs the run's new files with M(aorta.cluster.trace_pack), pulls the archive over the node's
    own connection (at most C(aorta_collect_parallel) nodes at once, lock files on the controller),
    checks its sha256 against the node's, retries a failed pull twice, and removes the archive on the
    node. C(aorta_collect_delete_remote) removes the node's output only after its archive checked."
  - "Never fails for the node's trouble: a node found gone is data (C(node_result.state) C(unreachable),
    C(collect.error)), never waited on again. M(aorta.cluster.combined_traces) then verifies every
    node's archive into one tree."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: partial
    details: Nothing is collected in check mode.
  diff_mode:
    support: none
  action:
    description: The work is done by an action plugin on the controller.
    support: full
"""

EXAMPLES = r"""
- name: Read each node's end, tear down and collect
  aorta.cluster.node_end:
  register: aorta_end
"""

RETURN = r"""
node_result:
  description: The node's row of run.json (state, exit_code, failure, progress, node_errors, fabric, log...).
  returned: always
  type: dict
collect:
  description: The node's row for M(aorta.cluster.combined_traces) (archive, archive_sha256, files, error,
    pull_attempts).
  returned: when aorta_collect_traces
  type: dict
summaries:
  description: The node's trace summaries (aorta_parse_on_nodes).
  returned: when aorta_parse_on_nodes
  type: list
  elements: dict
"""
