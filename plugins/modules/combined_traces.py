#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: combined_traces
short_description: Write every node's traces into one verified combined_traces tree with a manifest
version_added: 0.1.0
description:
  - Runs on the controller, in its own Python, after the nodes' archives (from M(aorta.cluster.trace_pack)) were pulled.
    Unpacks each node's archive into C(node_<rank>/) under a staging directory, checks every file
    against the sha256 the node computed before packing, reads the global ranks from each trace's
    C(distributedInfo), writes C(manifest.json), and only then renames the staging tree into
    O(dest). A crash or a full disk never leaves a half tree that looks complete; the previous
    tree stays as it was until the rename, and its stale C(node_*) directories go with it.
  - A node whose archive is missing, damaged or does not match is recorded in the manifest with
    the reason; the other nodes are still written. The module fails only when it cannot write.
  - Running it twice on the same inputs changes nothing.
  - "A tree already at O(dest) is never replaced by one that lacks a node whose files it holds (a
    collection again while that node does not answer): it is kept as it was, and RV(kept_previous) says why."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  dest:
    description: The combined tree, usually C(<results>/combined_traces).
    type: path
    required: true
  run_id:
    description: The run's id, recorded in the manifest.
    type: str
    required: true
  expected_ranks:
    description:
      - Number of global ranks the run had (nodes x processes per node).
      - "Left out: the nodes that ran (the head's C(aorta_launch.nnodes), without the nodes preflight
        excluded; else every node of C(aorta_nodes)) times the ranks per node (the head's
        C(aorta_launch.nproc), else C(aorta_nproc_per_node) or C(aorta_gpus_per_node)). The head is
        the first node's C(aorta_launch.head), else the first node."
    type: int
  nodes:
    description:
      - One entry per node of the run.
      - "Left out: each node of C(aorta_nodes) whose M(aorta.cluster.node_end) result (registered as
        C(aorta_end)) has a C(collect); when no node has an C(aorta_end) at all the task is skipped:
        nothing was collected."
    type: list
    elements: dict
    suboptions:
      rank:
        description: Node rank; the files go to C(node_<rank>/).
        type: int
        required: true
      name:
        description: Inventory name.
        type: str
        required: true
      mgmt_ip:
        description: Management (SSH) address.
        type: str
      vpc_ip:
        description: Fabric address.
        type: str
      state:
        description: The node's run state (ok, failed, timeout, unreachable, not_started).
        type: str
      archive:
        description: The pulled archive on the controller; empty when nothing could be pulled.
        type: path
      archive_sha256:
        description: sha256 of the archive as written on the node.
        type: str
      tree:
        description:
          - Where the node's files were unpacked as they streamed in (instead of O(nodes[].archive));
            moved into place and checked against O(nodes[].files).
        type: path
      arrived:
        description:
          - For O(nodes[].tree), each file's size and sha256 as written on the controller (path -> [size, sha256]).
        type: dict
      compression:
        description: V(zstd), V(gzip) or V(none).
        type: str
      files:
        description: The files as M(aorta.cluster.trace_pack) listed them (path, size, sha256).
        type: list
        elements: dict
      error:
        description: Why nothing could be collected from this node, if so.
        type: str
      pull_msg:
        description: What the transfer said, added to the node's error when its archive did not arrive.
        type: str
      pull_attempts:
        description: How many pulls the archive took (more than 1 after a transient failure); kept in the manifest.
        type: int
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Verifies everything in a scratch directory, reports whether O(dest) would change, leaves it alone.
  diff_mode:
    support: none
  action:
    description:
      - An action plugin of the same name does the work in the controller's own Python, whatever
        the hosts' C(ansible_python_interpreter) (a cluster file's vars often set one for every host,
        implicit localhost included, that the controller does not have); no module process starts.
    support: full
"""

EXAMPLES = r"""
- name: Consolidate the pulled archives
  aorta.cluster.combined_traces:
    dest: "{{ aorta_results_dir_resolved }}/combined_traces"
    run_id: "{{ aorta_run_id_resolved }}"
    expected_ranks: 16
    nodes:
      - rank: 0
        name: gpu-a01
        state: ok
        archive: /results/r1/.staging/node_0/traces.tar
        archive_sha256: "6d1f..."
        compression: zstd
        files:
          - {path: torch_profiler/rank0/trace.json, size: 10, sha256: "ab12..."}
      - {rank: 1, name: gpu-a02, state: unreachable, error: unreachable}
  delegate_to: localhost
  run_once: true

# After every node's aorta.cluster.node_end (registered as aorta_end): the rank count and the
# nodes come from the run's nodes.
- name: Verify and write the combined tree
  aorta.cluster.combined_traces:
    dest: "{{ aorta_results_dir_resolved }}/combined_traces"
    run_id: "{{ aorta_run_id_resolved }}"
  register: aorta_combined
"""

RETURN = r"""
manifest:
  description: The manifest written to C(<dest>/manifest.json).
  returned: always
  type: dict
  contains:
    run_id:
      description: The run id.
      type: str
    expected_ranks:
      description: Ranks 0..N-1 the run should have produced.
      type: list
      elements: int
    missing_ranks:
      description: Expected ranks found in no trace.
      type: list
      elements: int
    aorta_pairs:
      description: Aorta's TensorBoard copy of a rank's profiler window (C(*.pt.trace.json)) and the Chrome
        trace of the same window beside it (C(profiling.tensorboard) and C(chrome_trace) both on); the copy
        does not count as a second file of the rank.
      type: dict
    nodes:
      description:
        - Per node, its rank, name, addresses, state, whether it was collected, the error, and
          every file with size, sha256 and the ranks read from it; C(pull_attempts), how many pulls it took.
      type: list
      elements: dict
missing_ranks:
  description: Expected ranks found in no trace (salvaged partial run).
  returned: always
  type: list
  elements: int
unreachable_nodes:
  description: Nodes nothing could be collected from.
  returned: always
  type: list
  elements: str
files:
  description: Number of files in the tree.
  returned: always
  type: int
kept_previous:
  description: One line saying that the tree already at O(dest) was kept, naming the nodes whose files it
    holds and this collection did not get.
  returned: when the tree already there was kept
  type: str
found_nothing:
  description: One line saying that no node gave a file of the run (an unknown id, nodes not reached, or the run's own
    output directory not given), naming the nodes not reached; C(playbooks/trace_collect.yml) fails with it.
  returned: when the tree holds no file
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._combined import ARGUMENT_SPEC, write

# expected_ranks and nodes may be left out for the action plugin, which reads them from the run's nodes.
MODULE_ARGUMENT_SPEC = dict(ARGUMENT_SPEC, expected_ranks={"type": "int"}, nodes={"type": "list", "elements": "dict"})


def main() -> None:
    module = AnsibleModule(argument_spec=MODULE_ARGUMENT_SPEC, supports_check_mode=True)
    if module.params["expected_ranks"] is None or module.params["nodes"] is None:
        # Only the action plugin (the controller) sees the nodes' results.
        module.fail_json(msg="expected_ranks and nodes: give both, or run the task through its action plugin")
    result, failure = write(module.params, module.check_mode)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
