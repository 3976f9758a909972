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
  - Runs on the controller after the nodes' archives (from M(aorta.cluster.trace_pack)) were pulled.
    Unpacks each node's archive into C(node_<rank>/) under a staging directory, checks every file
    against the sha256 the node computed before packing, reads the global ranks from each trace's
    C(distributedInfo), writes C(manifest.json), and only then renames the staging tree into
    O(dest). A crash or a full disk never leaves a half tree that looks complete; the previous
    tree stays as it was until the rename, and its stale C(node_*) directories go with it.
  - A node whose archive is missing, damaged or does not match is recorded in the manifest with
    the reason; the other nodes are still written. The module fails only when it cannot write.
  - Running it twice on the same inputs changes nothing.
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
    description: Number of global ranks the run had (nodes x processes per node).
    type: int
    required: true
  nodes:
    description: One entry per node of the run.
    type: list
    elements: dict
    required: true
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
"""

import errno
import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils._layout import aorta_pairs
from ansible_collections.aorta.cluster.plugins.module_utils._traces import (
    TraceError,
    distributed_ranks,
    sha256_file,
    unpack,
)

# How many nodes are unpacked at once (decompression, hashing and writing overlap across nodes).
UNPACK_THREADS = 4


def collect_node(node, staging, run_command):
    """Unpack and verify one node into ``staging/node_<rank>``; returns its manifest entry."""
    entry = {
        "rank": node["rank"],
        "name": node["name"],
        "mgmt_ip": node.get("mgmt_ip"),
        "vpc_ip": node.get("vpc_ip"),
        "state": node.get("state"),
        "collected": False,
        "error": node.get("error") or None,
        "files": [],
    }
    if node.get("pull_attempts"):
        entry["pull_attempts"] = int(node["pull_attempts"])
    expected = {f["path"]: f for f in node.get("files") or []}
    archive = node.get("archive")
    if entry["error"] or not (archive or node.get("tree")):
        if not entry["error"] and not expected:
            entry.update(collected=True)  # the node wrote nothing new: an empty, verified set
        elif not entry["error"]:
            entry["error"] = "no archive arrived"
        return entry
    target = os.path.join(staging, f"node_{node['rank']}")
    if node.get("tree"):
        return _adopt_tree(node, entry, expected, target)
    try:
        if node.get("archive_sha256") and sha256_file(archive) != node["archive_sha256"]:
            raise TraceError(f"{archive}: checksum differs from the node's; the transfer damaged it")
        arrived = {}  # (size, sha256) of each file, taken as it was written
        names = unpack(archive, target, node.get("compression") or "gzip", run_command, hashes=arrived)
    except TraceError as exc:
        shutil.rmtree(target, ignore_errors=True)
        entry["error"] = str(exc)
        return entry
    except OSError as exc:  # the archive never arrived, or cannot be read: this node's loss, not the tree's
        shutil.rmtree(target, ignore_errors=True)
        if exc.errno == errno.ENOSPC:
            raise
        said = f" (the pull said: {node['pull_msg']})" if node.get("pull_msg") else ""
        entry["error"] = f"archive {archive}: {exc.strerror}{said}"
        return entry
    return _verify(entry, expected, target, names, arrived)


def _adopt_tree(node, entry, expected, target):
    """A node whose files were streamed (unpacked on arrival, each hashed as it was written): its
    tree moves into place and is checked the same way as an unpacked archive."""
    arrived = {rel: tuple(pair) for rel, pair in (node.get("arrived") or {}).items()}
    try:
        os.rename(node["tree"], target)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise
        entry["error"] = f"streamed files {node['tree']}: {exc.strerror}"
        return entry
    return _verify(entry, expected, target, list(arrived), arrived)


def _verify(entry, expected, target, names, arrived):
    """Every file the node listed arrived, with the node's size and sha256; the rank each holds."""
    if sorted(names) != sorted(expected):
        shutil.rmtree(target, ignore_errors=True)
        entry["error"] = f"archive holds {len(names)} files, the node listed {len(expected)}"
        return entry
    for rel in sorted(names):
        path = os.path.join(target, rel)
        size, digest = arrived[rel]
        if digest != expected[rel]["sha256"] or size != expected[rel]["size"]:
            shutil.rmtree(target, ignore_errors=True)
            entry.update(files=[], error=f"{rel}: sha256 on arrival differs from the node's original")
            return entry
        try:
            ranks = distributed_ranks(path)
        except TraceError:
            ranks = []
        entry["files"].append({"path": rel, "size": expected[rel]["size"], "sha256": digest, "ranks": ranks})
    entry["collected"] = True
    return entry


def build_manifest(params, entries):
    found = {}
    pairs = {}
    for entry in entries:
        node_pairs = aorta_pairs([item["path"] for item in entry["files"]])
        pairs.update({f"node_{entry['rank']}/{a}": f"node_{entry['rank']}/{b}" for a, b in node_pairs.items()})
        for item in entry["files"]:
            if item["path"] in node_pairs:
                continue  # Aorta's TensorBoard copy of the same window: not a second file of the rank
            for rank in item["ranks"]:
                found.setdefault(rank, []).append(f"node_{entry['rank']}/{item['path']}")
    expected = list(range(params["expected_ranks"]))
    return {
        "run_id": params["run_id"],
        "expected_ranks": expected,
        "found_ranks": sorted(found),
        "missing_ranks": [r for r in expected if r not in found],
        "ranks_in_several_files": {str(r): paths for r, paths in sorted(found.items()) if len(paths) > 1},
        "aorta_pairs": pairs,
        "unreachable_nodes": [
            e["name"] for e in entries if e["state"] == "unreachable" or (e["error"] or "").startswith("unreachable")
        ],
        "nodes_not_collected": [e["name"] for e in entries if not e["collected"]],
        "nodes": entries,
    }


def current_manifest(dest):
    try:
        with open(os.path.join(dest, "manifest.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "expected_ranks": {"type": "int", "required": True},
            "nodes": {"type": "list", "elements": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    dest = module.params["dest"].rstrip("/")
    parent = os.path.dirname(dest) or "."
    staging = os.path.join(parent, f".{os.path.basename(dest)}.staging-{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(staging)
        nodes = sorted(module.params["nodes"], key=lambda n: n["rank"])
        # Nodes unpack side by side: zstd, hashing and the disk release the GIL.
        with ThreadPoolExecutor(max_workers=max(1, min(len(nodes), UNPACK_THREADS))) as pool:
            entries = list(pool.map(lambda node: collect_node(node, staging, module.run_command), nodes))
        manifest = build_manifest(module.params, entries)
        changed = current_manifest(dest) != manifest
        if changed and not module.check_mode:
            with open(os.path.join(staging, "manifest.json"), "w") as handle:
                json.dump(manifest, handle, indent=2, sort_keys=True)
                handle.write("\n")
            old = None
            if os.path.exists(dest):
                old = f"{staging}.old"
                os.rename(dest, old)
            os.rename(staging, dest)
            if old:
                shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        hint = "no space left on the controller" if exc.errno == errno.ENOSPC else exc.strerror
        module.fail_json(msg=f"cannot write {dest}: {hint} ({exc.filename}); the previous tree, if any, is intact")
    shutil.rmtree(staging, ignore_errors=True)
    module.exit_json(
        changed=changed,
        manifest=manifest,
        missing_ranks=manifest["missing_ranks"],
        unreachable_nodes=manifest["unreachable_nodes"],
        files=sum(len(e["files"]) for e in entries),
    )


if __name__ == "__main__":
    main()
