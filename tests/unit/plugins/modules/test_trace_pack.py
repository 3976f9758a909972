# SPDX-License-Identifier: GPL-3.0-or-later
"""trace_pack and combined_traces on real files: verified, atomic, idempotent, salvaging."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _traces
from ansible_collections.aorta.cluster.plugins.modules import combined_traces, trace_pack
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _stream


def kineto(rank, world, events=3):
    return json.dumps(
        {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world},
            "traceEvents": [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1} for i in range(events)],
        }
    )


def make_run(root, ranks, world, old=()):
    for rank in ranks:
        path = root / "torch_profiler" / f"rank{rank}" / "trace_step6.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kineto(rank, world))
        (root / f"rank_{rank:02d}_metrics.jsonl").write_text('{"step": 1}\n')
    for rel in old:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kineto(99, world))
        os.utime(path, (time.time() - 86400, time.time() - 86400))


def run(module, args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as info:
        module.main()
    return info.value.code, json.loads(capsys.readouterr().out)


def pack_node(tmp_path, name, ranks, world, capsys, compression="auto", old=()):
    root = tmp_path / name / "out"
    make_run(root, ranks, world, old)
    (root / "combined_traces").mkdir()
    (root / "combined_traces" / "stale.json").write_text(kineto(0, world))
    code, packed = run(
        trace_pack,
        {
            "root": str(root),
            "since": time.time() - 3600,
            "archive": str(tmp_path / name / "a.tar"),
            "compression": compression,
        },
        capsys,
    )
    assert code == 0, packed
    return packed


def node(rank, name, packed, **extra):
    entry = {
        "rank": rank,
        "name": name,
        "state": "ok",
        "archive": packed["archive"],
        "files": packed["files"],
        "archive_sha256": packed["archive_sha256"],
        "compression": packed["compression"],
    }
    entry.update(extra)
    return entry


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_pack_takes_only_new_files_and_the_tree_is_verified(tmp_path, capsys, compression):
    if compression == "zstd" and not _traces.zstd_available():
        pytest.skip("zstd command not installed (tools/install-host-deps.sh installs it)")
    a = pack_node(tmp_path, "a", [0, 1], 4, capsys, compression, old=["torch_profiler/rank9/trace_old.json"])
    b = pack_node(tmp_path, "b", [2, 3], 4, capsys, compression)
    assert a["compression"] == compression
    paths = {f["path"] for f in a["files"]}
    assert "torch_profiler/rank9/trace_old.json" not in paths  # older than the floor
    assert not any(p.startswith("combined_traces") for p in paths)
    dest = tmp_path / "results" / "combined_traces"
    code, out = run(
        combined_traces,
        {"dest": str(dest), "run_id": "r1", "expected_ranks": 4, "nodes": [node(0, "a", a), node(1, "b", b)]},
        capsys,
    )
    assert code == 0, out
    assert out["changed"] is True
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["found_ranks"] == [0, 1, 2, 3] and manifest["missing_ranks"] == []
    assert manifest["ranks_in_several_files"] == {}
    for entry in manifest["nodes"]:
        for item in entry["files"]:
            original = tmp_path / entry["name"] / "out" / item["path"]
            copied = dest / f"node_{entry['rank']}" / item["path"]
            assert copied.read_bytes() == original.read_bytes()
            assert item["sha256"] == _traces.sha256_file(str(original))
    assert (dest / "node_0" / "torch_profiler" / "rank1" / "trace_step6.json").exists()
    # Same inputs again: nothing changes.
    code, again = run(
        combined_traces,
        {"dest": str(dest), "run_id": "r1", "expected_ranks": 4, "nodes": [node(0, "a", a), node(1, "b", b)]},
        capsys,
    )
    assert code == 0 and again["changed"] is False


def test_stale_node_directories_go_and_failed_nodes_are_recorded(tmp_path, capsys):
    a = pack_node(tmp_path, "a", [0, 1], 6, capsys)
    dest = tmp_path / "combined_traces"
    (dest / "node_7").mkdir(parents=True)
    (dest / "node_7" / "old.json").write_text("{}")
    nodes = [
        node(0, "a", a),
        {"rank": 1, "name": "b", "state": "unreachable", "error": "unreachable: timed out"},
        {"rank": 2, "name": "c", "state": "failed", "archive": "", "files": [{"path": "x", "size": 1, "sha256": "0"}]},
    ]
    code, out = run(combined_traces, {"dest": str(dest), "run_id": "r2", "expected_ranks": 6, "nodes": nodes}, capsys)
    assert code == 0, out
    assert not (dest / "node_7").exists()
    manifest = out["manifest"]
    assert manifest["missing_ranks"] == [2, 3, 4, 5]
    assert manifest["unreachable_nodes"] == ["b"]
    assert manifest["nodes_not_collected"] == ["b", "c"]
    assert manifest["nodes"][2]["error"] == "no archive arrived"
    assert manifest["nodes"][2]["state"] == "failed"


def test_damaged_or_tampered_archives_are_refused_per_node(tmp_path, capsys):
    a = pack_node(tmp_path, "a", [0], 2, capsys, "gzip")
    b = pack_node(tmp_path, "b", [1], 2, capsys, "gzip")
    with open(b["archive"], "r+b") as handle:
        handle.seek(200)
        handle.write(b"XXXX")
    lying = [dict(f, sha256="0" * 64) for f in a["files"]]
    nodes = [node(0, "a", a, files=lying), node(1, "b", b)]
    dest = tmp_path / "combined_traces"
    code, out = run(combined_traces, {"dest": str(dest), "run_id": "r3", "expected_ranks": 2, "nodes": nodes}, capsys)
    assert code == 0, out
    errors = [n["error"] for n in out["manifest"]["nodes"]]
    assert "differs from the node's original" in errors[0]
    assert "checksum differs" in errors[1]
    assert not (dest / "node_0").exists() and not (dest / "node_1").exists()
    assert out["missing_ranks"] == [0, 1]


def test_an_archive_that_never_arrived_is_that_nodes_loss_and_the_others_are_kept(tmp_path, capsys):
    """A pull that failed without an exit code (failed_when: false hides it) once listed an archive
    that was not there: the whole tree failed and, with every host failed, run.json was never written."""
    a = pack_node(tmp_path, "a", [0], 2, capsys, "gzip")
    b = pack_node(tmp_path, "b", [1], 2, capsys, "gzip")
    os.unlink(a["archive"])
    nodes = [node(0, "a", a, pull_msg="Connection reset by peer"), node(1, "b", b)]
    dest = tmp_path / "combined_traces"
    code, out = run(combined_traces, {"dest": str(dest), "run_id": "r4", "expected_ranks": 2, "nodes": nodes}, capsys)
    assert code == 0, out
    lost, kept = out["manifest"]["nodes"]
    assert not lost["collected"] and "No such file or directory" in lost["error"]
    assert "the pull said: Connection reset by peer" in lost["error"]
    assert kept["collected"] and (dest / "node_1").is_dir()
    assert out["missing_ranks"] == [0] and out["manifest"]["nodes_not_collected"] == ["a"]


def test_archive_with_escaping_paths_is_refused(tmp_path, capsys):
    evil = tmp_path / "evil.tar"
    (tmp_path / "f").write_text("x")
    with tarfile.open(evil, "w") as tar:
        tar.add(tmp_path / "f", arcname="../../escape.json")
    with pytest.raises(_traces.TraceError, match="not a plain relative file"):
        _traces.unpack(str(evil), str(tmp_path / "out"), "none", None)
    assert not (tmp_path.parent / "escape.json").exists()


def test_check_mode_leaves_the_tree_alone(tmp_path, capsys):
    a = pack_node(tmp_path, "a", [0], 1, capsys)
    dest = tmp_path / "combined_traces"
    code, out = run(
        combined_traces,
        {
            "dest": str(dest),
            "run_id": "r4",
            "expected_ranks": 1,
            "nodes": [node(0, "a", a)],
            "_ansible_check_mode": True,
        },
        capsys,
    )
    assert code == 0 and out["changed"] is True
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_full_disk_fails_clearly_and_keeps_the_previous_tree(tmp_path, capsys):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=False, capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        dest = small / "combined_traces"
        (dest / "node_0").mkdir(parents=True)
        (dest / "manifest.json").write_text('{"run_id": "previous"}')
        root = tmp_path / "big"
        (root / "torch_profiler" / "rank0").mkdir(parents=True)
        (root / "torch_profiler" / "rank0" / "trace.json").write_bytes(os.urandom(512 * 1024))
        code, packed = run(
            trace_pack, {"root": str(root), "archive": str(tmp_path / "big.tar"), "compression": "none"}, capsys
        )
        assert code == 0
        code, out = run(
            combined_traces,
            {"dest": str(dest), "run_id": "r5", "expected_ranks": 1, "nodes": [node(0, "a", packed)]},
            capsys,
        )
        assert code == 1
        assert out["msg"].startswith(f"cannot write {dest}: no space left on the controller")
        assert json.loads((dest / "manifest.json").read_text()) == {"run_id": "previous"}
        assert [p.name for p in small.iterdir()] == ["combined_traces"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_ranks_come_from_distributed_info_not_names(tmp_path):
    path = tmp_path / "rank5_trace.json"
    path.write_text(kineto(12, 16))
    assert _traces.distributed_ranks(str(path)) == [12]
    zipped = tmp_path / "t.json.gz"
    with gzip.open(zipped, "wt") as handle:
        handle.write(kineto(3, 4))
    assert _traces.distributed_ranks(str(zipped)) == [3]
    late = tmp_path / "late.json"
    late.write_text('{"traceEvents": [' + ",".join(['{"ph":"X"}'] * 5000) + '], "distributedInfo": {"rank": 7}}')
    assert _traces.distributed_ranks(str(late), head_bytes=1024) == [7]
    (tmp_path / "none.json").write_text('{"traceEvents": []}')
    assert _traces.distributed_ranks(str(tmp_path / "none.json")) == []
    assert _traces.distributed_ranks(str(tmp_path / "x.jsonl")) == []


@pytest.mark.parametrize(
    "name,rank",
    [
        ("mi300/resnet-act-checkpoint.json.gz", 0),
        ("nccl/cpu-only-rank34.json.gz", 34),
        ("nccl/nccl-data.json.gz", 0),
        ("mi300/qwen1.5-0.5b-chat.json.gz", None),
    ],
)
def test_real_fixture_trace_ranks(fixtures_dir, name, rank):
    ranks = _traces.distributed_ranks(str(fixtures_dir / "traces" / name))
    assert ranks == ([] if rank is None else [rank])


def test_aortas_pair_is_collected_and_not_a_second_file_of_its_rank(tmp_path, capsys):
    """TensorBoard's copy beside the Chrome trace of the same window (Aorta's distributed.yaml):
    both arrive verified; the rank is in one file, and the manifest names the pair."""
    root = tmp_path / "a" / "out"
    make_run(root, [0, 1], 2)
    for rank in (0, 1):
        copy = root / "torch_profiler" / f"rank{rank}" / f"host-a_{100 + rank}.1758927066581847260.pt.trace.json"
        copy.write_text(kineto(rank, 2))
    code, packed = run(
        trace_pack,
        {
            "root": str(root),
            "since": time.time() - 3600,
            "archive": str(tmp_path / "a" / "a.tar"),
            "compression": "none",
        },
        capsys,
    )
    assert code == 0, packed
    dest = tmp_path / "results" / "combined_traces"
    code, out = run(
        combined_traces,
        {"dest": str(dest), "run_id": "r1", "expected_ranks": 2, "nodes": [node(0, "a", packed)]},
        capsys,
    )
    assert code == 0, out
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["found_ranks"] == [0, 1] and manifest["ranks_in_several_files"] == {}
    assert manifest["aorta_pairs"] == {
        f"node_0/torch_profiler/rank{r}/host-a_{100 + r}.1758927066581847260.pt.trace.json": (
            f"node_0/torch_profiler/rank{r}/trace_step6.json"
        )
        for r in (0, 1)
    }
    assert (dest / "node_0" / "torch_profiler" / "rank1" / "host-a_101.1758927066581847260.pt.trace.json").is_file()


def streamed_node(tmp_path, rank, name, ranks, world):
    """A node whose files were streamed (node_end's path over ssh): unpacked on arrival."""
    root = tmp_path / name / "out"
    make_run(root, ranks, world)
    tree = tmp_path / "results" / ".staging" / f"node_{rank}" / "tree"
    argv = ["sh", "-c", _stream.remote_command(sys.executable, str(root), time.time() - 3600, "auto")]
    got = _stream.pull(argv, str(tree), 30)
    return {"rank": rank, "name": name, "state": "ok", "archive": "", "tree": str(tree), **got}


def test_streamed_trees_move_into_place_checked_against_what_the_node_read(tmp_path, capsys):
    a = streamed_node(tmp_path, 0, "a", [0, 1], 4)
    b = streamed_node(tmp_path, 1, "b", [2, 3], 4)
    dest = tmp_path / "results" / "combined_traces"
    code, out = run(combined_traces, {"dest": str(dest), "run_id": "r1", "expected_ranks": 4, "nodes": [a, b]}, capsys)
    assert code == 0, out
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["found_ranks"] == [0, 1, 2, 3] and manifest["nodes_not_collected"] == []
    for entry in manifest["nodes"]:
        for item in entry["files"]:
            original = tmp_path / entry["name"] / "out" / item["path"]
            assert (dest / f"node_{entry['rank']}" / item["path"]).read_bytes() == original.read_bytes()
    assert not (tmp_path / "results" / ".staging" / "node_0" / "tree").exists()  # moved, not copied


def test_a_streamed_file_that_differs_from_what_the_node_read_is_that_nodes_loss(tmp_path, capsys):
    a = streamed_node(tmp_path, 0, "a", [0, 1], 4)
    b = streamed_node(tmp_path, 1, "b", [2, 3], 4)
    rel = "torch_profiler/rank2/trace_step6.json"
    b["arrived"][rel] = [b["arrived"][rel][0], "0" * 64]
    dest = tmp_path / "results" / "combined_traces"
    code, out = run(combined_traces, {"dest": str(dest), "run_id": "r1", "expected_ranks": 4, "nodes": [a, b]}, capsys)
    assert code == 0, out
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["nodes_not_collected"] == ["b"] and manifest["missing_ranks"] == [2, 3]
    assert "sha256 on arrival differs" in manifest["nodes"][1]["error"]
    assert not (dest / "node_1").exists()
