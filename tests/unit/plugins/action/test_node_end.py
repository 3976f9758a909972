# SPDX-License-Identifier: GPL-3.0-or-later
"""node_end over a two-node "cluster" of local hosts with nothing launched: each node's lease
released, its run's new files packed, pulled (one at a time) and checked, its archive removed."""

from __future__ import annotations

import hashlib
import os
import tarfile

from test_node_prepare import PREPARE, leases, run_vars

END = {"name": "End", "aorta.cluster.node_end": None, "register": "aorta_end"}


def test_each_nodes_new_files_are_pulled_checked_and_its_archive_removed(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_collect_parallel": 1, "aorta_collect_since": 0}
    host_vars = leases(tmp_path)
    for rank, name in enumerate(host_vars):
        node_root = tmp_path / f"node{rank}"
        trace = node_root / "out" / "torch_profiler" / f"rank{rank}" / "trace.json"
        trace.parent.mkdir(parents=True)
        trace.write_text('{"traceEvents": []}')
        host_vars[name] |= {"aorta_path": str(node_root), "aorta_output_dir": "out"}
        (node_root / "config").mkdir()
        (node_root / "config" / "distributed.yaml").write_text("")
        (node_root / "train.py").write_text("")
    settings.pop("aorta_path")
    _proc, out = cluster_play([PREPARE, END], host_vars=host_vars, extra_vars=settings)
    for rank, name in enumerate(host_vars):
        end = out["aorta_end"][name]
        assert not end.get("failed"), end.get("msg")
        assert end["node_result"]["state"] == "not_started" and end["node_result"]["rank"] == rank
        assert end["teardown"]["changed"]  # the lease preflight took is released
        row = end["collect"]
        assert row["error"] == "" and row["pull_attempts"] == 1 and row["rank"] == rank
        archive = tmp_path / "results" / ".staging" / f"node_{rank}" / "traces.tar"
        assert row["archive"] == str(archive)
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == row["archive_sha256"]
        assert [f["path"] for f in row["files"]] == [f"torch_profiler/rank{rank}/trace.json"]
        assert not os.path.exists(tmp_path / f"node{rank}" / ".aorta-cluster" / "prep-run" / "traces.tar")
        if row["compression"] == "none":
            with tarfile.open(archive) as tar:
                assert tar.getnames() == [f"torch_profiler/rank{rank}/trace.json"]
