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
LABEL_W = 150
BAR_RANKS = 64  # a stacked bar per rank up to this many ranks; above, the heat map shows every rank

# The two per-rank figures the views show, with what they are called on the page.
VIEW_KEYS = (
    ("compute_per_iteration_ms", "compute per iteration"),
    ("comm_wait_per_iteration_ms", "exposed communication per iteration"),
)


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


def heatmap(ranks: list, key: str, title: str, unit: str, span: float = 0.3):
    """A node x local-rank heat map of ``key`` (one value per rank), or None when no rank has it.

    Cells are tuples (x, y, fill, hover text): 8000 of them are drawn, and a tuple is the cheapest
    thing for the template to read."""
    values = {r["rank"]: r.get(key) for r in ranks if _number(r.get(key))}
    if not values:
        return None
    median = statistics.median(values.values())
    nodes, place, width = layout([r for r in ranks if r["rank"] in values])
    row_h = max(MIN_H, min(MAX_H, 1200 // max(len(nodes), 1)))
    labelled = row_h >= 10  # node names fit beside rows of ten pixels or more; else in each cell's title
    left = LABEL_W if labelled else 0
    node_of = {r["rank"]: r["node"] for r in ranks}
    cells = []
    for rank, value in values.items():
        i, local = place[rank]
        ratio = value / median if median > 0 else 1.0
        hover = f"{node_of[rank]} local {local} rank {rank}: {value:.3g} {unit} ({(ratio - 1) * 100:+.0f}%)"
        cells.append((left + local * CELL_W, i * row_h, colour(ratio, span), hover))
    return {
        "title": title,
        "width": left + width * CELL_W + 2,
        "height": len(nodes) * row_h + 2,
        "cell_w": CELL_W - 1,
        "cell_h": max(row_h - 1, 1),
        "labels": [(left - 4, i * row_h + row_h - 2, node) for i, node in enumerate(nodes)] if labelled else [],
        "font": min(11, row_h - 1),
        "cells": cells,
    }


def histogram(ranks: list, key: str, title: str, unit: str, bins: int = 30):
    """How ``key`` is distributed across ranks: a bar per bin with its count and range, or None."""
    values = sorted(r[key] for r in ranks if _number(r.get(key)))
    if len(values) < 2:
        return None
    low, high = values[0], values[-1]
    step = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / step), bins - 1)] += 1
    top = max(counts)
    bars = []
    for i, count in enumerate(counts):
        height = 0 if not count else max(1, int(120 * count / top))
        hover = f"{count} ranks from {low + i * step:.3g} to {low + (i + 1) * step:.3g} {unit}"
        bars.append((40 + i * 14, 130 - height, height, hover))
    return {
        "title": title,
        "width": bins * 14 + 60,
        "height": 160,
        "bar_w": 12,
        "bars": bars,
        "low": f"{low:.3g} {unit}",
        "high": f"{high:.3g} {unit}",
        "high_x": 40 + bins * 14,
        "top": top,
    }


BAR_PARTS = (
    ("compute", "#3b7dd8"),
    ("exposed communication", "#e8a33d"),
    ("other / idle", "#c8c8c8"),
)


def rank_bars(ranks: list, slow: set):
    """A stacked bar per rank (compute, exposed communication, the rest of its step), named
    stragglers' labels in red; None above BAR_RANKS ranks, where a bar is a pixel wide."""
    if not 1 < len(ranks) <= BAR_RANKS:
        return None
    rows = sorted(ranks, key=lambda r: r["rank"])
    parts = []
    for r in rows:
        compute = r.get("compute_per_iteration_ms") or 0.0
        wait = r.get("comm_wait_per_iteration_ms") or 0.0
        step = r.get("iteration_time_ms") or 0.0
        parts.append((compute, wait, max(step - compute - wait, 0.0)))
    top = max((sum(p) for p in parts), default=0.0) or 1.0
    bar_w, gap, plot_h, left = 18, 6, 160, 48
    bars = []
    for i, (r, values) in enumerate(zip(rows, parts)):
        x, base = left + i * (bar_w + gap), float(10 + plot_h)
        segments = []
        for (name, fill), value in zip(BAR_PARTS, values):
            height = plot_h * value / top
            base -= height
            segments.append((round(base, 1), round(height, 1), fill, f"rank {r['rank']} {name}: {value:.3g} ms"))
        bars.append({"x": x, "label": r["rank"], "slow": r["rank"] in slow, "segments": segments})
    width = left + len(rows) * (bar_w + gap) + 10
    return {
        "width": max(width, left + len(BAR_PARTS) * 170),
        "height": plot_h + 60,
        "bar_w": bar_w,
        "bars": bars,
        "axis_y": 10 + plot_h,
        "top": f"{top:.3g} ms",
        "legend": [(left + i * 170, name, fill) for i, (name, fill) in enumerate(BAR_PARTS)],
    }


def views(report: dict, threshold: float) -> list:
    """The heat maps of compute and exposed communication per iteration, with their distributions."""
    ranks = report.get("per_rank_summary") or []
    if len(ranks) < 2:
        return []
    span = max(3 * threshold, 0.1)
    out = []
    for key, what in VIEW_KEYS:
        heat = heatmap(ranks, key, f"{what} by node and local rank", "ms", span)
        if heat:
            out.append(
                {"what": what, "span": span, "heat": heat, "hist": histogram(ranks, key, f"{what} across ranks", "ms")}
            )
    return out
