# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The combined_traces tree: every node's files unpacked or moved into place, verified against what
the node read, and a manifest, renamed into place at once (documented in plugins/modules/combined_traces.py).

Private to this collection. Runs in the controller's own Python (the action plugin), or as the
module's body where the module itself is run; stdlib only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._layout import aorta_pairs
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import (
    TraceError,
    distributed_ranks,
    sha256_file,
    unpack,
)

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "run_id": {"type": "str", "required": True},
    "expected_ranks": {"type": "int", "required": True},
    "nodes": {"type": "list", "elements": "dict", "required": True},
}

# How many nodes are unpacked at once (decompression, hashing and writing overlap across nodes).
UNPACK_THREADS = 4


def collect_node(node, staging):
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
    if node.get("on_node") and not entry["error"]:
        # Sampled out (aorta_collect_traces sample): the traces stay on the node, listed as the node
        # read them, with where they lie for a pull later (playbooks/trace_collect.yml).
        entry.update(on_node=dict(node["on_node"]), files=[_listed(f) for f in expected.values()])
        return entry
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
        names = unpack(archive, target, node.get("compression") or "gzip", hashes=arrived)
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


def _listed(row):
    """A file the node listed and kept: its path, size, sha256 and the ranks it declares."""
    ranks = list(row.get("ranks") or [])
    return {"path": row["path"], "size": int(row["size"]), "sha256": row["sha256"], "ranks": ranks}


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
        "nodes_not_collected": [e["name"] for e in entries if not e["collected"] and not e.get("on_node")],
        # Their traces stay on the node (sampled out), every file listed with its sha256.
        "nodes_on_node": [e["name"] for e in entries if e.get("on_node")],
        "nodes": entries,
    }


def _write_manifest(path, manifest):
    """manifest.json as every writer of the tree writes it (sorted, indented, a final newline)."""
    with open(path, "w") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.write("\n")


def current_manifest(dest):
    try:
        with open(os.path.join(dest, "manifest.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def lost_nodes(previous, manifest):
    """The nodes whose files ``previous`` (the tree already there) holds and ``manifest`` (the one just
    collected) does not: a collection again while they do not answer, or once their files are gone
    from them (collected now, with none), would lose them."""
    now = {entry["name"]: entry for entry in manifest["nodes"]}
    lost = []
    for entry in (previous or {}).get("nodes") or []:
        found = now.get(entry.get("name")) or {}
        if entry.get("files") and not ((found.get("collected") and found.get("files")) or found.get("on_node")):
            lost.append(str(entry.get("name")))
    return lost


def _first_names(names, first=5):
    """The first ``first`` names and how many more: one bounded line at any node count."""
    return first_names(names, first)


def kept_line(dest, lost, gone=()):
    """Why the tree collected before stays: the nodes whose files it holds that gave none now, and
    the other nodes this collection could not reach (``gone``), each named."""
    others = [str(name) for name in gone if str(name) not in lost]  # not said twice
    unreached = f"; {len(others)} more not reached now: {_first_names(others)}" if others else ""
    return (
        f"trace_collect: {dest} kept as it was: {len(lost)} nodes whose files it holds were not collected now "
        f"({_first_names(lost)}: not reached, or their files gone from them){unreached}; nothing written over "
        "it. Collect again once they answer, or into another directory (-e aorta_results_dir=<new directory>)"
    )


def nothing_line(run_id, nodes, gone):
    """Why a collection that found no file did not do its job: an id no node ran, nodes that do not
    answer, or the run's own variables left out (its output directory is elsewhere)."""
    shown = f": {_first_names(gone)}" if gone else ""
    return (
        f"trace_collect: no file of run {run_id} on any of its {nodes} nodes ({len(gone)} not reached{shown}): "
        "check -e aorta_run_id, and pass the run's own -e (aorta_path, aorta_output_dir) as at its launch"
    )


def write(params, check_mode):
    """Build the tree for ``params`` (ARGUMENT_SPEC's keys, validated) and rename it into place
    unless ``check_mode``. Returns (result, failure): the task's result, and a message where the
    tree could not be written (the previous tree, if any, is then intact)."""
    dest = params["dest"].rstrip("/")
    parent = os.path.dirname(dest) or "."
    staging = os.path.join(parent, f".{os.path.basename(dest)}.staging-{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(staging)
        nodes = sorted(params["nodes"], key=lambda n: n["rank"])
        # Nodes unpack side by side: zstd, hashing and the disk release the GIL.
        with ThreadPoolExecutor(max_workers=max(1, min(len(nodes), UNPACK_THREADS))) as pool:
            entries = list(pool.map(lambda node: collect_node(node, staging), nodes))
        manifest = build_manifest(params, entries)
        previous = current_manifest(dest)
        # Never a tree with fewer nodes' files over the one collected before: the record stays whole.
        lost = lost_nodes(previous, manifest)
        changed = previous != manifest and not lost
        if changed and not check_mode:
            _write_manifest(os.path.join(staging, "manifest.json"), manifest)
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
        return {"changed": False}, f"cannot write {dest}: {hint} ({exc.filename}); the previous tree, if any, is intact"
    shutil.rmtree(staging, ignore_errors=True)
    result = {
        "changed": changed,
        "manifest": manifest,
        "missing_ranks": manifest["missing_ranks"],
        "unreachable_nodes": manifest["unreachable_nodes"],
        "files": sum(len(e["files"]) for e in entries),
    }
    if lost:
        result["kept_previous"] = kept_line(dest, lost, manifest["unreachable_nodes"])
    if not result["files"]:
        result["found_nothing"] = nothing_line(params["run_id"], len(nodes), manifest["unreachable_nodes"])
    return result, None


def adopt_pulled(dest, name, fetched, why):
    """A node whose traces the manifest lists ``on_node``, pulled later (``fetched``: node_end's row
    for it): unpacked and verified as at the run's end, then checked against the files the manifest
    listed (the same paths, sizes and sha256: nothing changed on the node since), moved into
    ``dest/node_<rank>`` and its manifest row marked collected, the manifest rewritten atomically
    under a lock (whoever else writes it meanwhile). A ``node_<rank>`` left by an attempt whose
    manifest write did not happen is replaced. Returns ``(entry, error)``."""
    with open(os.path.join(dest, ".manifest.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = current_manifest(dest)
        if manifest is None:
            return None, f"{dest}/manifest.json: no manifest to pull into"
        entry = next((e for e in manifest["nodes"] if e["name"] == name), None)
        if entry is None or not entry.get("on_node"):
            return entry, "" if entry else f"{name}: not a node of {dest}/manifest.json"
        staging = os.path.join(dest, f".pull-node_{entry['rank']}-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(staging)
            got = collect_node(dict(fetched, rank=entry["rank"], name=name), staging)
            listed = {f["path"]: (f["size"], f["sha256"]) for f in entry["files"]}
            arrived = {f["path"]: (f["size"], f["sha256"]) for f in got["files"]}
            if got["error"] or listed != arrived:
                changed = sorted(set(listed.items()) ^ set(arrived.items()))[:3]
                return entry, got["error"] or f"{name}: its files changed on the node since the run: {changed}"
            target = os.path.join(dest, f"node_{entry['rank']}")
            shutil.rmtree(target, ignore_errors=True)  # a leftover: the manifest still says on_node
            if got["files"]:
                os.rename(os.path.join(staging, f"node_{entry['rank']}"), target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        entry.update(collected=True, files=got["files"], pulled={"why": why, "from": entry.pop("on_node")})
        manifest["nodes_on_node"] = [n for n in manifest.get("nodes_on_node") or [] if n != name]
        partial = os.path.join(dest, ".manifest.json.partial")
        _write_manifest(partial, manifest)
        os.replace(partial, os.path.join(dest, "manifest.json"))
        return entry, ""
