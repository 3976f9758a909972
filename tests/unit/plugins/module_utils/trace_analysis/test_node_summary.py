# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's summary as a file: what it holds, what the task result keeps of it, how it is read back."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _decode, _node_summary


@pytest.fixture
def output(tmp_path, fixtures_dir):
    """A node's output directory: one real trace of rank 34, a log, and an earlier run's trace."""
    root = tmp_path / "out"
    trace = root / "torch_profiler" / "rank34" / "trace.json.gz"
    trace.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "traces" / "nccl" / "cpu-only-rank34.json.gz", trace)
    (root / "logs").mkdir()
    (root / "logs" / "train.log").write_text("step 1\n")
    old = root / "torch_profiler" / "rank34" / "old.json"
    old.write_text('{"traceEvents": []}')
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    return root


def test_the_summary_file_holds_the_summaries_and_every_file_and_the_result_only_figures(output, tmp_path):
    dest = str(tmp_path / "run" / "summary.json.gz")
    since = time.time() - 3600
    kept = _node_summary.summarise(str(output), since, dest)
    body = _node_summary.read(dest)
    # The summaries are the ones the controller's analysis computes of the same files.
    want = _analysis.analyse_all(_analysis.find_run_traces(str(output), since), max_workers=1)
    assert body["summaries"] == want and [s["rank"] for s in body["summaries"]] == [34]
    # Every file the collection takes, hashed as the node read it: the manifest's on_node rows.
    rows = {row["path"]: row for row in body["files"]}
    assert sorted(rows) == ["logs/train.log", "torch_profiler/rank34/trace.json.gz"]
    trace = output / "torch_profiler" / "rank34" / "trace.json.gz"
    assert rows["torch_profiler/rank34/trace.json.gz"]["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert rows["torch_profiler/rank34/trace.json.gz"]["ranks"] == [34] and rows["logs/train.log"]["ranks"] == []
    # The task result: the file's path, size and hash, and the analysis' figures; no summary.
    assert kept["sha256"] == hashlib.sha256(Path(dest).read_bytes()).hexdigest() and kept["size"] > 0
    assert (kept["traces"], kept["files"], kept["bytes"]) == (1, 2, trace.stat().st_size)
    assert kept["decoder"] == ("msgspec" if _decode.msgspec is not None else "json")
    assert kept["analysis_s"] >= 0 and kept["peak_rss_mb"] > 0 and "summaries" not in kept
    assert not os.path.exists(dest + ".partial")


def test_a_node_without_msgspec_says_so(output, tmp_path, monkeypatch):
    monkeypatch.setattr(_decode, "msgspec", None)
    kept = _node_summary.summarise(str(output), 0, str(tmp_path / "s.json.gz"))
    assert kept["decoder"] == "json" and _node_summary.read(kept["path"])["figures"]["decoder"] == "json"


def test_what_is_not_a_summary_is_named(tmp_path):
    bad = tmp_path / "s.json.gz"
    bad.write_text("not gzip")
    with pytest.raises(ValueError, match=r"s\.json\.gz: not a node summary \(BadGzipFile"):
        _node_summary.read(str(bad))
    with gzip.open(bad, "wt") as handle:
        handle.write('{"format": "other"}')
    with pytest.raises(ValueError, match=r"not a node summary \(format 'other'\)"):
        _node_summary.read(str(bad))
