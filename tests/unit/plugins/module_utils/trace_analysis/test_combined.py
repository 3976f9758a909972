# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/trace_analysis/_combined.py: the manifest's arithmetic, and a tree that cannot be written.
(The whole path on real packed and streamed files: modules/test_trace_pack.py.)"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _combined


def entry(rank, name, files, state="ok", error=None):
    return {"rank": rank, "name": name, "state": state, "error": error, "collected": error is None, "files": files}


def test_the_manifest_counts_ranks_once_and_names_the_nodes_not_collected():
    tensorboard = "tb/host_1.1.pt.trace.json"
    chrome = "tb/rank0_trace.json"
    entries = [
        entry(
            0,
            "a",
            [
                {"path": chrome, "ranks": [0]},
                {"path": tensorboard, "ranks": [0]},  # Aorta's TensorBoard copy of the same window
                {"path": "extra/rank1.json", "ranks": [1]},
                {"path": "again/rank1.json", "ranks": [1]},
            ],
        ),
        entry(1, "b", [], state="unreachable", error="unreachable: ssh timed out"),
        entry(2, "c", [], error="pull failed: reset"),
    ]
    manifest = _combined.build_manifest({"run_id": "r1", "expected_ranks": 6}, entries)
    assert manifest["found_ranks"] == [0, 1] and manifest["missing_ranks"] == [2, 3, 4, 5]
    assert manifest["ranks_in_several_files"] == {"1": ["node_0/extra/rank1.json", "node_0/again/rank1.json"]}
    assert manifest["unreachable_nodes"] == ["b"] and manifest["nodes_not_collected"] == ["b", "c"]


def test_a_tree_that_cannot_be_written_is_one_message_and_the_old_one_stays(tmp_path):
    dest = tmp_path / "combined_traces"
    params = {"dest": str(dest), "run_id": "r1", "expected_ranks": 0, "nodes": []}
    assert _combined.write(params, check_mode=False)[1] is None
    blocked = dict(params, dest=str(tmp_path / "a-file" / "combined_traces"), run_id="r2")
    (tmp_path / "a-file").write_text("not a directory")
    result, failure = _combined.write(blocked, check_mode=False)
    assert result == {"changed": False} and failure.startswith(f"cannot write {blocked['dest']}: ")
    assert failure.endswith("the previous tree, if any, is intact")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "combined_traces"]


def test_a_node_that_wrote_nothing_new_is_an_empty_verified_set(tmp_path):
    params = {"dest": str(tmp_path / "combined_traces"), "run_id": "r1", "expected_ranks": 0, "nodes": []}
    params["nodes"] = [{"rank": 0, "name": "a", "state": "ok", "files": []}]
    result, failure = _combined.write(params, check_mode=False)
    assert failure is None and result["changed"] is True and result["files"] == 0
    assert result["manifest"]["nodes"][0]["collected"] is True
    assert _combined.write(params, check_mode=False)[0]["changed"] is False  # the same inputs change nothing


def test_a_node_pulled_later_replaces_a_leftover_and_one_with_no_file_is_marked_collected(tmp_path):
    """adopt_pulled: the manifest's on_node rows, a node_<rank> left by an attempt whose manifest
    write did not happen (replaced), and a node that listed no file (collected, nothing to move)."""
    data = b'{"traceEvents": []}'
    digest = hashlib.sha256(data).hexdigest()
    listed = [{"path": "t.json", "size": len(data), "sha256": digest, "ranks": []}]
    where = {"root": "/a/out", "since": 1.0, "aorta_path": "/a"}
    nodes = [
        {"rank": 0, "name": "h", "state": "ok", "files": [], "on_node": where},
        {"rank": 1, "name": "w", "state": "ok", "files": listed, "on_node": where},
    ]
    dest = tmp_path / "combined_traces"
    params = {"dest": str(dest), "run_id": "r", "expected_ranks": 0, "nodes": nodes}
    assert _combined.write(params, check_mode=False)[1] is None
    (dest / "node_1").mkdir()
    (dest / "node_1" / "stale").write_text("left by an attempt")
    tree = tmp_path / "arrived"
    tree.mkdir()
    (tree / "t.json").write_bytes(data)
    fetched = {"files": listed, "tree": str(tree), "arrived": {"t.json": [len(data), digest]}, "state": "ok"}
    entry, error = _combined.adopt_pulled(str(dest), "w", fetched, "asked")
    assert error == "" and entry["collected"] and entry["pulled"] == {"why": "asked", "from": where}
    assert sorted(p.name for p in (dest / "node_1").iterdir()) == ["t.json"]
    entry, error = _combined.adopt_pulled(str(dest), "h", {"files": [], "state": "ok"}, "asked")
    assert error == "" and entry["collected"] and not (dest / "node_0").exists()
    assert json.loads((dest / "manifest.json").read_text())["nodes_on_node"] == []


def test_a_tree_is_never_replaced_by_one_that_lacks_a_node_whose_files_it_holds(tmp_path):
    """trace_collect again while a node does not answer: the tree collected before keeps that node's
    files (kept byte for byte, nothing renamed), and the result says so in one line naming it."""
    dest = tmp_path / "combined_traces"
    (dest / "node_0").mkdir(parents=True)
    (dest / "node_0" / "rank0.json").write_text("{}")
    held = entry(0, "a", [{"path": "rank0.json", "size": 2, "sha256": "x", "ranks": [0]}])
    previous = _combined.build_manifest({"run_id": "r1", "expected_ranks": 1}, [held])
    _combined._write_manifest(str(dest / "manifest.json"), previous)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    dead = {"rank": 0, "name": "a", "state": "unreachable", "error": "unreachable: ssh timed out", "files": []}
    params = {"dest": str(dest), "run_id": "r1", "expected_ranks": 1, "nodes": [dead]}
    result, failure = _combined.write(params, check_mode=False)
    assert failure is None and result["changed"] is False and result["files"] == 0
    assert result["kept_previous"] == (
        f"trace_collect: {dest} kept as it was: 1 nodes whose files it holds were not collected now (a: not "
        "reached, or their files gone from them); nothing written over it. Collect again once they answer, or "
        "into another directory (-e aorta_results_dir=<new directory>)"
    )
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    # Nothing came either: said apart, naming the node not reached (trace_collect.yml fails with it).
    assert result["found_nothing"] == (
        "trace_collect: no file of run r1 on any of its 1 nodes (1 not reached: a): check -e aorta_run_id, and "
        "pass the run's own -e (aorta_path, aorta_output_dir) as at its launch"
    )
    # At any node count, one bounded line: the first five names and how many more.
    many = [f"n{i}" for i in range(1000)]
    assert "1000 nodes whose files it holds were not collected now (n0, n1, n2, n3, n4 and 995 more: " in (
        _combined.kept_line("/t", many)
    )
    assert "(1000 not reached: n0, n1, n2, n3, n4 and 995 more): check" in _combined.nothing_line("r1", 1000, many)
    # The node answered but has none of its files now (a worker dead beside it): the tree is kept
    # all the same, and the line names the worker not reached too.
    alive = {"rank": 0, "name": "a", "state": "ok", "collected": True, "error": None, "files": []}
    worker = {"rank": 1, "name": "b", "state": "unreachable", "error": "unreachable: ssh timed out", "files": []}
    result, failure = _combined.write(dict(params, expected_ranks=2, nodes=[alive, worker]), check_mode=False)
    assert failure is None and result["changed"] is False
    said = "were not collected now (a: not reached, or their files gone from them); 1 more not reached now: b; "
    assert said + "nothing written over it" in result["kept_previous"]
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    # A node that held no file loses nothing: the new tree is written.
    empty = _combined.build_manifest({"run_id": "r1", "expected_ranks": 1}, [entry(0, "a", [])])
    assert _combined.lost_nodes(empty, _combined.build_manifest(params, [dict(dead, collected=False)])) == []
