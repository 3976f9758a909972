# SPDX-License-Identifier: GPL-3.0-or-later
"""The views of every rank: a node x local-rank heat map, a histogram and the per-rank bars, as
geometry, and as the inline SVG the report's template draws from it."""

from __future__ import annotations

import random
import re
import xml.dom.minidom

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _render, _views


def ranks(nodes: int, per_node: int = 8, slow_node=None, seed: int = 1):
    rng = random.Random(seed)
    return [
        {
            "rank": r,
            "node": f"node-{r // per_node:04d}",
            "compute_per_iteration_ms": 100.0 * (1.3 if r // per_node == slow_node else 1.0) * rng.gauss(1, 0.02),
            "comm_wait_per_iteration_ms": 20.0 * rng.gauss(1, 0.05),
            "iteration_time_ms": 130.0,
        }
        for r in range(nodes * per_node)
    ]


def test_a_slow_node_is_a_red_row_and_every_cell_names_its_node_and_rank():
    heat = _views.heatmap(ranks(128, slow_node=77), "compute_per_iteration_ms", "compute", "ms", 0.3)
    svg = _render.render_svg("heatmap", heat)
    xml.dom.minidom.parseString(svg)  # well-formed: the browser draws it without a script
    cells = re.findall(r"<rect [^>]*fill='(#[0-9a-f]{6})'><title>([^<]*)</title>", svg)
    assert len(cells) == 1024
    slow = [fill for fill, title in cells if title.startswith("node-0077 ")]
    assert len(slow) == 8 and all(fill.startswith("#ff") and fill[3:5] < "60" for fill in slow)  # deep red
    others = [fill for fill, title in cells if not title.startswith("node-0077 ")]
    assert all(int(fill[3:5], 16) > 200 for fill in others if fill.startswith("#ff"))  # near white
    assert "node-0077 local 3 rank 619: " in svg


def test_8000_cells_stay_under_a_megabyte_and_small_clusters_get_node_names_beside_the_rows():
    big = _render.render_svg("heatmap", _views.heatmap(ranks(1000), "compute_per_iteration_ms", "compute", "ms"))
    assert len(re.findall("<rect ", big)) == 8000 and len(big.encode()) < 1_000_000
    small = _render.render_svg("heatmap", _views.heatmap(ranks(8), "compute_per_iteration_ms", "compute", "ms"))
    assert small.count("<text ") == 8 and ">node-0007</text>" in small


def test_the_histogram_counts_every_rank_once():
    svg = _render.render_svg("histogram", _views.histogram(ranks(16), "compute_per_iteration_ms", "c", "ms", bins=10))
    xml.dom.minidom.parseString(svg)
    counts = [int(n) for n in re.findall(r"<title>(\d+) ranks from", svg)]
    assert sum(counts) == 128 and len(counts) == 10


def test_the_bars_stack_each_ranks_step_and_mark_the_stragglers_up_to_64_ranks():
    bars = _views.rank_bars(ranks(2, per_node=4), {5})
    svg = _render.render_svg("rank_bars", bars)
    xml.dom.minidom.parseString(svg)
    assert [b["label"] for b in bars["bars"]] == list(range(8)) and [b["slow"] for b in bars["bars"]].count(True) == 1
    # compute + exposed communication + the rest is the rank's whole step: the bars share one scale.
    heights = [sum(s[1] for s in b["segments"]) for b in bars["bars"]]
    assert abs(max(heights) - 160) < 0.5 and min(heights) > 150
    assert "rank 5 compute: " in svg and svg.count("fill='#b00020'") == 1
    assert _views.rank_bars(ranks(8, per_node=8), set())["bars"] and _views.rank_bars(ranks(9, 8), set()) is None


def test_views_need_two_ranks_and_a_value():
    assert _views.views({"per_rank_summary": ranks(1, per_node=1)}, 0.1) == []
    assert _views.heatmap([{"rank": 0, "node": "a"}], "compute_per_iteration_ms", "c", "ms") is None
    shown = _views.views({"per_rank_summary": ranks(2)}, 0.1)
    assert [v["what"] for v in shown] == [what for _key, what in _views.VIEW_KEYS]
    assert all(v["heat"] and v["hist"] for v in shown)
