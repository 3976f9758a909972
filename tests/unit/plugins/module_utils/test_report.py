# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's own parts: the notes on what the controller's Python lacks (plots, fast decoding)."""

from __future__ import annotations

import gzip
import json
import sys

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils import _decode, _render, _report


def test_a_python_without_matplotlib_or_msgspec_is_said_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    monkeypatch.setattr(_decode, "msgspec", None)
    tools = _report.tool_notes()
    assert tools["plots"] is False and tools["fast_decoder"] is False
    report = _report.build_report(str(tmp_path))
    report["tools"] = tools
    html = _render.render_html(report)
    assert "no plots: matplotlib is not installed" in html and "slow decoding: msgspec" in html


@pytest.mark.parametrize(("prefix", "world"), [("dlrm-rank", 8), ("sampled-rank", 128)])
def test_each_multi_rank_set_is_ranked_from_its_distributed_info(tmp_path, fixtures_dir, prefix, world):
    """The files are renamed so that their names disagree with their ranks: the rank is the trace's own."""
    sources = sorted((fixtures_dir / "traces" / "set2").glob(f"{prefix}*.json.gz"))
    folder = tmp_path / "traces"
    folder.mkdir()
    for i, source in enumerate(reversed(sources)):
        (folder / f"trace-{i}.json.gz").write_bytes(source.read_bytes())
    report = _report.build_report(str(folder))
    ranks = {row["rank"]: row["file"] for row in report["per_rank_summary"]}
    own = {}
    for i, source in enumerate(reversed(sources)):
        info = json.loads(gzip.decompress(source.read_bytes()))["distributedInfo"]
        assert info["world_size"] == world
        own[info["rank"]] = f"trace-{i}.json.gz"
    assert ranks == own and len(ranks) == len(sources)
    assert report["missing_ranks"] == [r for r in range(world) if r not in own]
