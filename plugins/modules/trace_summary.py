#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trace_summary
short_description: Analyse a node's own traces where they are and write a small summary file
version_added: 0.1.0
description:
  - "The per-rank step of M(aorta.cluster.trace_parse), run ON a node over the traces under O(root),
    so a large cluster need not move every trace to the controller: only the summaries come back
    (per rank its metrics, the per-step evidence of the straggler test and its part of the merged
    timeline, bounded to 5000 events: tens to a few hundred KB), and M(aorta.cluster.trace_parse)
    builds the report and C(timeline.json) from them."
  - "With O(dest) (what M(aorta.cluster.node_end) uses) the summaries go into that file (gzip JSON),
    with the list of every file the collection would take (path, size, sha256, ranks), and the
    result carries only the file's path, size and sha256 and the analysis' figures: a node's task
    result stays small whatever its traces hold. Without O(dest) the summaries are returned."
  - Needs only the node's Python standard library (msgspec is used when installed).
  - "It analyses the files the run's collection takes from O(root) (M(aorta.cluster.trace_pack)'s):
    those modified at or after O(since), never a symlink nor anything under C(combined_traces),
    C(.aorta-cluster) or C(.git); like M(aorta.cluster.trace_parse) in the controller's
    C(combined_traces), no C(manifest.json) and nothing under a directory named with a leading dot.
    So the report from these summaries and the report from the collected traces read the same traces."
  - Unreadable files are returned as per-file errors; the others are still analysed.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  root:
    description: Directory holding the node's traces (the run's output directory).
    type: path
    required: true
  since:
    description:
      - Epoch seconds; older files belong to an earlier run and are not analysed (the floor the
        collection uses, M(aorta.cluster.trace_pack)'s O(aorta.cluster.trace_pack#module:since)).
      - V(0) analyses every file under O(root).
    type: float
    default: 0
  include_unlinked_kernels:
    description: Count every GPU event, like TraceLens' C(--include_unlinked_kernels).
    type: bool
    default: false
  max_workers:
    description: Processes analysing files at once on the node; default 1, so training hosts are not loaded.
    type: int
    default: 1
  dest:
    description:
      - Write the summaries and the file list to this file (gzip JSON, renamed into place) instead of
        returning them.
    type: path
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Without O(dest), read-only and the same in check mode; with O(dest), nothing is written in check mode.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Summarise each node's traces where they are
  aorta.cluster.trace_summary:
    root: /home/me/aorta/aorta_runs/20261130T101500-a1b2c3
    since: 1796040000  # the run's start floor: the files its collection would take
  register: aorta_node_summary
"""

RETURN = r"""
summaries:
  description:
    - One entry per trace file, as M(aorta.cluster.trace_parse) computes them (times in ms).
    - A file that could not be analysed has only C(file) and C(error).
  returned: when O(dest) is not given
  type: list
  elements: dict
summary:
  description:
    - "The file written: C(path), C(size), C(sha256); and the analysis: C(analysis_s), C(decoder)
      (C(msgspec) or C(json), the standard library's), C(python), C(peak_rss_mb), C(traces) and
      C(bytes) analysed, C(files) and C(files_bytes) listed."
  returned: when O(dest) is given
  type: dict
  sample: {"path": "/home/me/aorta/.aorta-cluster/RUN/summary.json.gz", "size": 48213, "analysis_s": 2.1,
           "decoder": "msgspec", "traces": 8, "bytes": 41943040, "files": 9}
"""

from ansible.module_utils.basic import AnsibleModule

# The analysis only: the node does not need the report's renderer (HTML, plots, CSV).
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import analyse_all, find_run_traces
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._node_summary import summarise


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "since": {"type": "float", "default": 0},
            "include_unlinked_kernels": {"type": "bool", "default": False},
            "max_workers": {"type": "int", "default": 1},
            "dest": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["dest"]:
        if module.check_mode:
            module.exit_json(changed=False, summary={"path": p["dest"]})
        written = summarise(p["root"], p["since"], p["dest"], p["include_unlinked_kernels"], p["max_workers"])
        module.exit_json(changed=True, summary=written)
    paths = find_run_traces(module.params["root"], module.params["since"])
    summaries = analyse_all(paths, module.params["include_unlinked_kernels"], module.params["max_workers"])
    module.exit_json(changed=False, summaries=summaries)


if __name__ == "__main__":
    main()
