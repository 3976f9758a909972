# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The geometry of the views of every rank, for the report's template to draw as inline SVG.

Private to this collection; standard library only. No JavaScript and no plotting library: a node x
local-rank heat map (a row per node, a cell per GPU, each with a hover title), a histogram of the
ranks' values, and a stacked bar per rank for small runs. Colour is the value against the median
rank: blue below, white at it, red above, saturated at the straggler threshold's multiple, so one
slow node is a red row. These functions return numbers and strings only; _report_template draws.
"""

from __future__ import annotations

import statistics

CELL_W = 16  # px per local rank
MAX_H = 14  # px per node when there are few
MIN_H = 2  # px per node at a thousand nodes: a red row still shows
LABEL_FONT = 11
CHAR_W = 0.62  # a sans-serif character's mean width, in font sizes: enough for digits and names
MAX_LABEL_CHARS = 40  # a longer node name is cut, with an ellipsis; each cell's title keeps it whole
AXIS_W = 18  # px for an axis title written upwards beside the plot
BAR_RANKS = 64  # a stacked bar per rank up to this many ranks; above, the heat map shows every rank

# The two per-rank figures the views show (keys of per_rank_summary), with what they are called
# on the page: per step, one ProfilerStep#N, as everywhere on the page.
VIEW_KEYS = (
    ("compute_per_iteration_ms", "compute per step"),
    ("comm_wait_per_iteration_ms", "exposed communication per step"),
)


def text_w(text: str, font: int = LABEL_FONT) -> int:
    """How wide ``text`` draws at ``font`` px, rounded up: margins are sized from it, so no label
    is cut at the SVG's edge."""
    return int(len(text) * font * CHAR_W) + 1


def tick(value: float) -> str:
    """A short tick label: 3 significant figures, never an exponent above 1 (1080, 108, 10.8, 1.08)."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def colour(ratio: float, span: float) -> str:
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


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _label(node) -> str:
    name = str(node)
    return name if len(name) <= MAX_LABEL_CHARS else name[: MAX_LABEL_CHARS - 1] + "…"


def heatmap(ranks: list, key: str, title: str, unit: str, span: float = 0.3):
    """A node x local-rank heat map of ``key`` (one value per rank), or None when no rank has it.

    Both axes are titled (node, local rank), the local ranks numbered along the top, and a colour
    key below says what blue, white and red are in ``unit``. Cells are tuples (x, y, fill, hover
    text): 8000 of them are drawn, and a tuple is the cheapest thing for the template to read."""
    values = {r["rank"]: r.get(key) for r in ranks if _number(r.get(key))}
    if not values:
        return None
    median = statistics.median(values.values())
    nodes, place, width = layout([r for r in ranks if r["rank"] in values])
    row_h = max(MIN_H, min(MAX_H, 1200 // max(len(nodes), 1)))
    labelled = row_h >= 10  # node names fit beside rows of ten pixels or more; else in each cell's title
    names = [_label(node) for node in nodes] if labelled else []
    left = AXIS_W + (max(text_w(n) for n in names) + 6 if names else 0)
    top = 30  # the axis title and the local ranks' numbers above the cells
    node_of = {r["rank"]: r["node"] for r in ranks}
    cells = []
    for rank, value in values.items():
        i, local = place[rank]
        ratio = value / median if median > 0 else 1.0
        hover = f"{node_of[rank]} local {local} rank {rank}: {value:.3g} {unit} ({(ratio - 1) * 100:+.0f}%)"
        cells.append((left + local * CELL_W, top + i * row_h, colour(ratio, span), hover))
    plot_h = len(nodes) * row_h
    percent = f"{span * 100:.0f}%"
    key_items = [
        (colour(1 - span, span), f"-{percent} ({tick(median * (1 - span))} {unit})"),
        ("#ffffff", f"median rank ({tick(median)} {unit})"),
        (colour(1 + span, span), f"+{percent} ({tick(median * (1 + span))} {unit})"),
    ]
    legend, x = [], 4
    for fill, words in key_items:
        legend.append((x, fill, words))
        x += 16 + text_w(words) + 12
    x_title = "local rank (GPU) →"
    return {
        "title": title,
        "width": max(left + width * CELL_W + 2, left + text_w(x_title), x),
        "height": top + plot_h + 34,
        "cell_w": CELL_W - 1,
        "cell_h": max(row_h - 1, 1),
        "labels": [(left - 4, top + i * row_h + row_h - 2, n) for i, n in enumerate(names)],
        "font": min(LABEL_FONT, row_h - 1),
        "cells": cells,
        # Behind the cells, where rows are tall enough: the gaps between cells draw a grid, so a
        # white cell (at the median) still shows.
        "grid": (left - 1, top - 1, width * CELL_W + 1, plot_h + 1) if labelled else None,
        "columns": [(left + local * CELL_W + CELL_W // 2, str(local)) for local in range(width)],
        "x_title": (left, x_title),
        "y_title": (13, top + plot_h / 2, "node ↓ (rank order)" if plot_h >= 130 else "node"),
        "key_y": top + plot_h + 10,
        "legend": legend,
    }


def histogram(ranks: list, key: str, title: str, unit: str, bins: int = 30, what: str = ""):
    """How ``key`` is distributed across ranks: a bar per bin with its count and range, or None.
    The x axis is ``what`` in ``unit`` (its lowest and highest value marked), the y axis the number
    of ranks (0 and the fullest bin's count marked)."""
    values = sorted(r[key] for r in ranks if _number(r.get(key)))
    if len(values) < 2:
        return None
    low, high = values[0], values[-1]
    step = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / step), bins - 1)] += 1
    top = max(counts)
    left = AXIS_W + text_w(str(top)) + 8
    plot_top, plot_h = 10, 120
    base = plot_top + plot_h
    bars = []
    for i, count in enumerate(counts):
        height = 0 if not count else max(1, int(plot_h * count / top))
        hover = f"{count} ranks from {low + i * step:.3g} to {low + (i + 1) * step:.3g} {unit}"
        bars.append((left + 1 + i * 14, base - height, height, hover))
    right = left + bins * 14
    x_title = f"{what or key} ({unit})"
    return {
        "title": title,
        "width": max(right, left + text_w(x_title)) + 8,
        "height": base + 42,
        "bar_w": 12,
        "bars": bars,
        "left": left,
        "right": right,
        "base": base,
        "plot_top": plot_top,
        "low": tick(low),
        "high": tick(high),
        "top": top,
        "x_title": x_title,
        "y_title": (13, plot_top + plot_h / 2, "ranks"),
    }


BAR_PARTS = (
    ("compute", "#3b7dd8"),
    ("exposed communication", "#e8a33d"),
    ("other / idle", "#c8c8c8"),
)


def rank_bars(ranks: list, slow: set):
    """A stacked bar per rank (compute, exposed communication, the rest of its step), named
    stragglers' labels in red; None above BAR_RANKS ranks, where a bar is a pixel wide. The y axis
    is ms per step (0 and the longest step marked), the x axis the rank."""
    if not 1 < len(ranks) <= BAR_RANKS:
        return None
    rows = sorted(ranks, key=lambda r: r["rank"])
    parts = []
    for r in rows:
        compute = r.get("compute_per_iteration_ms") or 0.0
        wait = r.get("comm_wait_per_iteration_ms") or 0.0
        # step_time_ms; iteration_time_ms is its older name (reports before the rename).
        step = r.get("step_time_ms", r.get("iteration_time_ms")) or 0.0
        parts.append((compute, wait, max(step - compute - wait, 0.0)))
    top = max((sum(p) for p in parts), default=0.0) or 1.0
    top_label = tick(top)
    bar_w, gap, plot_h = 18, 6, 160
    left = AXIS_W + text_w(top_label) + 10
    bars = []
    for i, (r, values) in enumerate(zip(rows, parts)):
        x, base = left + 4 + i * (bar_w + gap), float(10 + plot_h)
        segments = []
        for (name, fill), value in zip(BAR_PARTS, values):
            height = plot_h * value / top
            base -= height
            segments.append((round(base, 1), round(height, 1), fill, f"rank {r['rank']} {name}: {value:.3g} ms"))
        bars.append({"x": x, "label": r["rank"], "slow": r["rank"] in slow, "segments": segments})
    width = left + 4 + len(rows) * (bar_w + gap) + 10
    return {
        "width": max(width, left + len(BAR_PARTS) * 170),
        "height": plot_h + 76,
        "bar_w": bar_w,
        "bars": bars,
        "left": left,
        "axis_y": 10 + plot_h,
        "top": top_label,
        "x_title": (left + 4 + len(rows) * (bar_w + gap) / 2, "rank"),
        "y_title": (13, 10 + plot_h / 2, "ms per step"),
        "legend": [(left + i * 170, name, fill) for i, (name, fill) in enumerate(BAR_PARTS)],
    }


def views(report: dict, threshold: float) -> list:
    """The heat maps of compute and exposed communication per step, with their distributions."""
    ranks = report.get("per_rank_summary") or []
    if len(ranks) < 2:
        return []
    span = max(3 * threshold, 0.1)
    out = []
    for key, what in VIEW_KEYS:
        heat = heatmap(ranks, key, f"{what} by node and local rank", "ms", span)
        if heat:
            hist = histogram(ranks, key, f"{what} across ranks", "ms", what=what)
            out.append({"what": what, "span": span, "heat": heat, "hist": hist})
    return out
