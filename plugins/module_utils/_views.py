# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Views of every rank that read at 8 and at 8000 ranks: inline SVG, standard library only.

Private to this collection. No JavaScript and no plotting library: a node x local-rank heat map
(a row per node, a cell per GPU, each with a <title> that the browser shows on hover) and a
histogram of the ranks' values. Colour is the value against the median rank: blue below, white
at it, red above, saturated at the straggler threshold's multiple, so one slow node is a red row.
"""

from __future__ import annotations

import html
import statistics

CELL_W = 16  # px per local rank
MAX_H = 14  # px per node when there are few
MIN_H = 2  # px per node at a thousand nodes: a red row still shows
LABEL_W = 150


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _colour(ratio: float, span: float) -> str:
    """Blue below the median, white at it, red above; saturated at ``span`` either side."""
    t = max(-1.0, min(1.0, (ratio - 1.0) / span)) if span > 0 else 0.0
    if t >= 0:
        g = b = int(255 - 200 * t)
        return f"#ff{g:02x}{b:02x}"
    r = g = int(255 + 200 * t)
    return f"#{r:02x}{g:02x}ff"


def layout(ranks: list) -> tuple:
    """(nodes in order, {rank: (node index, local index)}, the most ranks any node has)."""
    nodes: list = []
    members: dict = {}
    for r in sorted(ranks, key=lambda r: r["rank"]):
        if r["node"] not in members:
            nodes.append(r["node"])
            members[r["node"]] = []
        members[r["node"]].append(r["rank"])
    place = {}
    for i, node in enumerate(nodes):
        for local, rank in enumerate(members[node]):
            place[rank] = (i, local)
    width = max((len(m) for m in members.values()), default=0)
    return nodes, place, width


def heatmap_svg(ranks: list, key: str, title: str, unit: str, span: float = 0.3) -> str:
    """A node x local-rank heat map of ``key`` (one value per rank), or '' when no rank has it."""
    values = {r["rank"]: r.get(key) for r in ranks if isinstance(r.get(key), (int, float))}
    if not values:
        return ""
    median = statistics.median(values.values())
    nodes, place, width = layout([r for r in ranks if r["rank"] in values])
    row_h = max(MIN_H, min(MAX_H, 1200 // max(len(nodes), 1)))
    label = row_h >= 10  # node names fit beside rows of ten pixels or more; else in each cell's title
    left = LABEL_W if label else 0
    w, h = left + width * CELL_W + 2, len(nodes) * row_h + 2
    by_rank = {r["rank"]: r for r in ranks}
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{w}' height='{h}' viewBox='0 0 {w} {h}'>"
        f"<title>{_esc(title)}</title>"
    ]
    if label:
        for i, node in enumerate(nodes):
            parts.append(
                f"<text x='{left - 4}' y='{i * row_h + row_h - 2}' font-size='{min(11, row_h - 1)}' "
                f"text-anchor='end'>{_esc(node)}</text>"
            )
    for rank, value in values.items():
        i, local = place[rank]
        ratio = value / median if median > 0 else 1.0
        parts.append(
            f"<rect x='{left + local * CELL_W}' y='{i * row_h}' width='{CELL_W - 1}' height='{max(row_h - 1, 1)}' "
            f"fill='{_colour(ratio, span)}'><title>{_esc(by_rank[rank]['node'])} local {local} rank {rank}: "
            f"{value:.3g} {unit} ({(ratio - 1) * 100:+.0f}%)</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)


def histogram_svg(ranks: list, key: str, title: str, unit: str, bins: int = 30) -> str:
    """How ``key`` is distributed across ranks: a bar per bin, its count and range on hover."""
    values = sorted(r[key] for r in ranks if isinstance(r.get(key), (int, float)))
    if len(values) < 2:
        return ""
    low, high = values[0], values[-1]
    step = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / step), bins - 1)] += 1
    w, h, bar_w = bins * 14 + 60, 160, 12
    top = max(counts)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{w}' height='{h}' viewBox='0 0 {w} {h}'>"
        f"<title>{_esc(title)}</title>"
    ]
    for i, count in enumerate(counts):
        height = 0 if not count else max(1, int(120 * count / top))
        parts.append(
            f"<rect x='{40 + i * 14}' y='{130 - height}' width='{bar_w}' height='{height}' fill='#3b7dd8'>"
            f"<title>{count} ranks from {low + i * step:.3g} to {low + (i + 1) * step:.3g} {unit}</title></rect>"
        )
    parts.append(
        f"<text x='40' y='148' font-size='11'>{low:.3g} {_esc(unit)}</text>"
        f"<text x='{40 + bins * 14}' y='148' font-size='11' text-anchor='end'>{high:.3g} {_esc(unit)}</text>"
        f"<text x='36' y='14' font-size='11' text-anchor='end'>{top}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def views_html(report: dict, threshold: float) -> str:
    """The heat maps of compute and exposed communication per iteration, and their distributions."""
    ranks = report.get("per_rank_summary") or []
    if len(ranks) < 2:
        return ""
    span = max(3 * threshold, 0.1)
    out = []
    for key, what in (
        ("compute_per_iteration_ms", "compute per iteration"),
        ("comm_wait_per_iteration_ms", "exposed communication per iteration"),
    ):
        heat = heatmap_svg(ranks, key, f"{what} by node and local rank", "ms", span)
        if not heat:
            continue
        hist = histogram_svg(ranks, key, f"{what} across ranks", "ms")
        out.append(
            f"<h3>{_esc(what.capitalize())}: a row per node, a cell per GPU</h3><p>Against the median rank: white at"
            f" it, red above, blue below, full colour at &plusmn;{span * 100:.0f}%; hover a cell for its node, rank"
            f" and value.</p>{heat}<p>Across ranks:</p>{hist}"
        )
    return f"<h2 id='views'>Every rank</h2>{''.join(out)}" if out else ""
