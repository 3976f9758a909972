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
    ends), then collects the run's new files, at most C(aorta_collect_parallel) nodes at once (lock
    files on the controller), a transfer that breaks off retried twice."
  - "Over the C(ssh) connection without a password, the node streams them (its module_utils/trace_analysis/_traces.py
    sent on stdin: each file read and hashed once, compressed into the SSH channel) and they are
    unpacked here as they arrive, each hashed as it is written; no archive on either side. Otherwise
    M(aorta.cluster.trace_pack) packs an archive that is pulled, checked against the node's sha256
    and removed on the node. C(aorta_collect_delete_remote) removes the node's output only after its
    files arrived whole."
  - "Never fails for the node's trouble: a node found gone is data (C(node_result.state) C(unreachable),
    C(collect.error)), never waited on again. M(aorta.cluster.combined_traces) then verifies every
    node's files into one tree."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    support: partial
    details: Nothing is collected in check mode.
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
  description:
    - What of the node's manifest row the task result carries (rank, name, state, error, the count of
      C(files), C(on_node)); the row itself, a line per file, is kept in C(row_file) on the controller,
      where M(aorta.cluster.combined_traces) reads it, so the result stays small whatever the node holds.
    - C(on_node) true (C(aorta_collect_traces) V(sample), a node other than the head) - its traces stay
      on the node, each listed with its size and sha256.
  returned: unless C(aorta_collect_traces) is V(none), and not in check mode
  type: dict
seconds:
  description:
    - Where the node's end went, in seconds, for the parts that ran; V(wait) for the node's supervisor
      to end, V(teardown) for its log and the backstop teardown, V(summary) for its own analysis and
      its file's fetch, V(collect) for its traces.
  returned: always
  type: dict
  sample: {"wait": 0.4, "teardown": 0.6, "collect": 2.8}
summary:
  description:
    - The node's summary of its own traces (C(aorta_collect_traces) V(sample) or V(none),
      M(aorta.cluster.trace_summary)), fetched into the results directory's
      C(node_summaries/node_<rank>.json.gz) and checked against its sha256 -
      C(path), C(sha256), C(size) and the analysis' figures (C(analysis_s), C(decoder), C(peak_rss_mb), C(traces),
      C(bytes)); or C(error).
  returned: with aorta_collect_traces sample or none, for a node reached at its end, not in check mode
  type: dict
"""
