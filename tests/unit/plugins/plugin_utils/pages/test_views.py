# SPDX-License-Identifier: GPL-3.0-or-later
"""The views of every rank: a node x local-rank heat map, a histogram and the per-rank bars, as
geometry, and as the inline SVG the report's template draws from it."""

from __future__ import annotations

import random
import re
import xml.dom.minidom

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _html, _views


def ranks(nodes: int, per_node: int = 8, slow_node=None, seed: int = 1):
    rng = random.Random(seed)
    return [
        {
            "rank": r,
            "node": f"node-{r // per_node:04d}",
            "compute_per_iteration_ms": 100.0 * (1.3 if r // per_node == slow_node else 1.0) * rng.gauss(1, 0.02),
            "comm_wait_per_iteration_ms": 20.0 * rng.gauss(1, 0.05),
            "step_time_ms": 130.0,
        }
        for r in range(nodes * per_node)
    ]


def test_a_slow_node_is_a_red_row_and_every_cell_names_its_node_and_rank():
    heat = _views.heatmap(ranks(128, slow_node=77), "compute_per_iteration_ms", "compute", "ms", 0.3)
    svg = _html.render_svg("heatmap", heat)
    xml.dom.minidom.parseString(svg)  # well-formed: the browser draws it without a script
    cells = re.findall(r"<rect [^>]*fill='(#[0-9a-f]{6})'><title>([^<]*)</title>", svg)
    assert len(cells) == 1024
    slow = [fill for fill, title in cells if title.startswith("node-0077 ")]
    assert len(slow) == 8 and all(fill.startswith("#ff") and fill[3:5] < "60" for fill in slow)  # deep red
    others = [fill for fill, title in cells if not title.startswith("node-0077 ")]
    assert all(int(fill[3:5], 16) > 200 for fill in others if fill.startswith("#ff"))  # near white
    assert "node-0077 local 3 rank 619: " in svg


def test_8000_cells_stay_under_a_megabyte_and_small_clusters_get_node_names_beside_the_rows():
    big = _html.render_svg("heatmap", _views.heatmap(ranks(1000), "compute_per_iteration_ms", "compute", "ms"))
    assert len(re.findall(r"<rect [^>]*><title>", big)) == 8000 and len(big.encode()) < 1_000_000
    small = _html.render_svg("heatmap", _views.heatmap(ranks(8), "compute_per_iteration_ms", "compute", "ms"))
    assert len(re.findall(r">node-\d{4}</text>", small)) == 8 and ">node-0007</text>" in small
    assert ">node-0007</text>" not in big  # a row of 1 px: the node is in each cell's title


def test_the_histogram_counts_every_rank_once():
    svg = _html.render_svg("histogram", _views.histogram(ranks(16), "compute_per_iteration_ms", "c", "ms", bins=10))
    xml.dom.minidom.parseString(svg)
    counts = [int(n) for n in re.findall(r"<title>(\d+) ranks from", svg)]
    assert sum(counts) == 128 and len(counts) == 10


def test_the_bars_stack_each_ranks_step_and_mark_the_stragglers_up_to_64_ranks():
    bars = _views.rank_bars(ranks(2, per_node=4), {5})
    svg = _html.render_svg("rank_bars", bars)
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


def _inside(svg: str) -> list:
    """Every text of ``svg`` with its extent by _views.text_w, and those that run past the SVG's edge
    (a rotated axis title is measured along its height)."""
    doc = xml.dom.minidom.parseString(svg).documentElement
    width, height = float(doc.getAttribute("width")), float(doc.getAttribute("height"))
    texts, outside = [], []
    for node in doc.getElementsByTagName("text"):
        words = "".join(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE)
        x, y, font = float(node.getAttribute("x")), float(node.getAttribute("y")), int(node.getAttribute("font-size"))
        w = _views.text_w(words, font)
        anchor = node.getAttribute("text-anchor") or "start"
        if node.getAttribute("transform").startswith("rotate(-90"):
            box = (x - font, y - w / 2, x, y + w / 2)
        else:
            start = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
            box = (start, y - font, start + w, y + 3)
        texts.append(words)
        if box[0] < 0 or box[1] < 0 or box[2] > width or box[3] > height:
            outside.append((words, box, (width, height)))
    return texts, outside


def test_every_axis_is_labelled_with_its_quantity_and_unit_and_no_label_runs_past_the_edge():
    # The first real run's clipped label: a 107.8 ms step drawn right-aligned at x=40 read ".7.8 ms".
    few = ranks(2, per_node=4)
    for r in few:
        r.update(step_time_ms=107.8, compute_per_iteration_ms=60.0, comm_wait_per_iteration_ms=20.0)
    bars = _html.render_svg("rank_bars", _views.rank_bars(few, set()))
    texts, outside = _inside(bars)
    assert outside == [] and "108" in texts and "ms per step" in texts and "rank" in texts
    hist = _views.histogram(ranks(16), "compute_per_iteration_ms", "c", "ms", what="compute per step")
    texts, outside = _inside(_html.render_svg("histogram", hist))
    assert outside == [] and "compute per step (ms)" in texts and "ranks" in texts and "0" in texts
    assert str(hist["top"]) in texts and hist["low"] in texts and hist["high"] in texts
    # Node names as long as a fully qualified host name, or longer.
    named = [
        dict(r, node=f"gpu-node-{r['rank'] // 8:03d}.rack-17.cluster.example.internal{'x' * 20}") for r in ranks(4)
    ]
    heat = _views.heatmap(named, "compute_per_iteration_ms", "compute per step by node and local rank", "ms")
    texts, outside = _inside(_html.render_svg("heatmap", heat))
    assert outside == [] and "local rank (GPU) →" in texts and "node" in texts
    assert [t for t in texts if t.startswith("gpu-node-000.")] == [named[0]["node"][:39] + "…"]
    assert [str(n) for n in range(8)] == [t for t in texts if t.isdigit()]  # the local ranks, numbered
    assert any(t.startswith("median rank (") and t.endswith(" ms)") for t in texts)  # the colour key
    texts, outside = _inside(
        _html.render_svg("heatmap", _views.heatmap(ranks(1000), "compute_per_iteration_ms", "c", "ms"))
    )
    assert outside == [] and "node ↓ (rank order)" in texts


def test_tick_labels_are_short_and_never_an_exponent():
    assert [_views.tick(v) for v in (1080.4, 107.8, 17.83, 1.234, 0.01234)] == ["1080", "108", "17.8", "1.23", "0.0123"]
