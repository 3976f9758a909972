# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A sampled run over a two-node "cluster" of local hosts: node_end leaves the worker's traces on it
(listed with their hashes, its summary fetched), then trace_pull brings them into combined_traces,
checked against the manifest; a file changed on the node since is refused and nothing moves."""

from __future__ import annotations

import hashlib
import json

from test_node_prepare import PREPARE, leases, run_vars

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _combined
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _pull

END = {"name": "End", "aorta.cluster.node_end": None, "register": "aorta_end"}
PULL = {
    "name": "Pull",
    "aorta.cluster.trace_pull": {"node": "{{ inventory_hostname }}", "why": "named by the analysis"},
    "register": "aorta_pulled",
    "when": "inventory_hostname != 'localhost'",
}
TRACE = {"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": []}


def sampled_run(cluster_play, tmp_path):
    """Both nodes ended with aorta_collect_traces sample; the combined tree written from their rows."""
    settings = run_vars(tmp_path) | {"aorta_collect_since": 0, "aorta_collect_traces": "sample"}
    host_vars = leases(tmp_path)
    for rank, name in enumerate(host_vars):
        root = tmp_path / f"node{rank}"
        trace = root / "out" / "torch_profiler" / f"rank{rank}" / "trace.json"
        trace.parent.mkdir(parents=True)
        trace.write_text(json.dumps(dict(TRACE, distributedInfo={"rank": rank, "world_size": 2})))
        (root / "out" / "train.log").write_text("step 1\n")
        host_vars[name] |= {"aorta_path": str(root), "aorta_output_dir": "out"}
        (root / "config").mkdir()
        (root / "config" / "distributed.yaml").write_text("")
        (root / "train.py").write_text("")
    settings.pop("aorta_path")
    _proc, out = cluster_play([PREPARE, END], host_vars=host_vars, extra_vars=settings)
    rows = []
    for name in host_vars:
        end = out["aorta_end"][name]
        assert not end.get("failed"), end.get("msg")
        assert end["summary"]["sha256"] and not end["summary"].get("error") and len(json.dumps(end)) < 8000
        rows.append(_pull.row_of(end["collect"]))
    dest = tmp_path / "results" / "combined_traces"
    _written, failure = _combined.write(
        {"dest": str(dest), "run_id": "prep-run", "expected_ranks": 2, "nodes": rows}, check_mode=False
    )
    assert failure is None
    return settings, host_vars, dest


def test_the_worker_stays_on_its_node_then_is_pulled_and_verified(cluster_play, tmp_path):
    settings, host_vars, dest = sampled_run(cluster_play, tmp_path)
    manifest = json.loads((dest / "manifest.json").read_text())
    head, worker = sorted(manifest["nodes"], key=lambda entry: entry["rank"])
    assert head["collected"] and (dest / "node_0" / "torch_profiler" / "rank0" / "trace.json").exists()
    assert not worker["collected"] and worker["on_node"]["root"] == str(tmp_path / "node1" / "out")
    assert manifest["nodes_on_node"] == ["127.0.0.1"] and manifest["missing_ranks"] == []
    trace = tmp_path / "node1" / "out" / "torch_profiler" / "rank1" / "trace.json"
    listed = {f["path"]: f["sha256"] for f in worker["files"]}
    assert listed["torch_profiler/rank1/trace.json"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert not (dest / "node_1").exists()
    assert sorted(p.name for p in (tmp_path / "results" / "node_summaries").iterdir()) == [
        "node_0.json.gz",
        "node_1.json.gz",
    ]

    _proc, out = cluster_play([PULL], host_vars=host_vars, extra_vars=settings)
    pulled = out["aorta_pulled"]["127.0.0.1"]
    assert not pulled.get("failed"), pulled.get("msg")
    assert pulled["changed"] and (pulled["node"], pulled["rank"], pulled["files"]) == ("127.0.0.1", 1, 2)
    after = json.loads((dest / "manifest.json").read_text())
    entry = next(e for e in after["nodes"] if e["rank"] == 1)
    assert entry["collected"] and entry["pulled"]["why"] == "named by the analysis" and "on_node" not in entry
    assert after["nodes_on_node"] == []
    assert (dest / "node_1" / "torch_profiler" / "rank1" / "trace.json").read_bytes() == trace.read_bytes()
    assert not (tmp_path / "results" / ".pull").exists()
    # Once more: already there, nothing changes.
    _proc, out = cluster_play([PULL], host_vars=host_vars, extra_vars=settings)
    assert not out["aorta_pulled"]["127.0.0.1"]["changed"]


def test_a_file_changed_on_the_node_since_the_run_is_refused_and_nothing_moves(cluster_play, tmp_path):
    settings, host_vars, dest = sampled_run(cluster_play, tmp_path)
    before = (dest / "manifest.json").read_text()
    (tmp_path / "node1" / "out" / "train.log").write_text("step 1\nstep 2\n")
    _proc, out = cluster_play([PULL], host_vars=host_vars, extra_vars=settings)
    pulled = out["aorta_pulled"]["127.0.0.1"]
    assert pulled["failed"] and pulled["msg"].startswith("127.0.0.1: its files changed on the node since the run")
    assert (dest / "manifest.json").read_text() == before and not (dest / "node_1").exists()
    assert not list(dest.glob(".pull-*"))
