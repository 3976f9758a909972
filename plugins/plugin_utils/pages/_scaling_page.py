# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scaling campaign's page (scaling.html), controller side: campaign.json (plugin_utils/campaign/
_document.document) made into plain text, numbers and SVG geometry; rendered by the one Jinja2
environment (pages/_html, template pages/_scaling_template).

First what a reader came for: the verdict and the nodes named, each with its evidence. Then the
weak-scaling curve: efficiency (each group's throughput per node over rung 1's median) against the
node count on a doubling axis, each group a dot linking to its run's report, the rungs' medians
joined. Then a row per rung, and a link to every group's report.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._history_page import figure
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._html import render

# width, height, left, right, top, bottom margins of the curve (px).
FRAME = (720, 300, 56, 16, 14, 40)
MAX_TEXT = 400


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _clip(text: Any) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "\u2026"


def _report(group: Mapping[str, Any]) -> str:
    """The link to a group's report, relative to the campaign's directory ('' when it has no dir)."""
    where = str(group.get("dir") or "")
    return urllib.parse.quote(f"{where}/report.html", safe="/") if where else ""


def curve_model(rungs: Sequence[Mapping[str, Any]], named: Sequence[str]) -> dict[str, Any]:
    """The SVG's geometry: a dot per group (x: the rung's node count on a doubling axis, y: its
    efficiency), red where the group did not complete or holds a named node, the rungs' medians as
    a line."""
    width, height, left, right, top, bottom = FRAME
    alone = next((r.get("samples_per_second_per_node") for r in rungs if r.get("size") == 1), None)
    sizes = [int(r["size"]) for r in rungs] or [1]
    top_x = math.log2(max(*sizes, 2))
    values = [
        g["samples_per_second_per_node"] / alone
        for r in rungs
        for g in r.get("groups") or ()
        if alone and g.get("samples_per_second_per_node")
    ]
    hi = max([1.1, *values])
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(size: int) -> str:
        return f"{left + plot_w * (math.log2(size) / top_x if top_x else 0.5):.1f}"

    def y(value: float) -> str:
        return f"{top + plot_h * (1 - value / hi):.1f}"

    dots, line = [], []
    for rung in rungs:
        size = int(rung["size"])
        for group in rung.get("groups") or ():
            rate = group.get("samples_per_second_per_node")
            if not rate or not alone:
                continue  # no throughput (a group that did not complete, or no rung 1): no dot to place
            value = rate / alone
            bad = group.get("status") != "COMPLETED" or any(n in named for n in group.get("nodes") or ())
            tip = f"{', '.join(group.get('nodes') or ())}: {group.get('status')}, efficiency {value:.3f}"
            dots.append({"x": x(size), "y": y(value), "bad": bad, "tip": _clip(tip), "href": _report(group)})
        if rung.get("efficiency") is not None:
            line.append(f"{x(size)},{y(float(rung['efficiency']))}")
    return {
        "width": width,
        "height": height,
        "label": "weak-scaling efficiency (throughput per node / alone)",
        "axis": f"M{left} {top}V{top + plot_h}H{left + plot_w}",
        "tick_x": left - 4,
        "ticks": [(f"{float(y(t)) + 4:.1f}", f"{t:.2f}") for t in (0.0, hi / 2, hi)],
        "sizes": [(x(s), top + plot_h + 14, str(s)) for s in sizes],
        "title_x": f"{left + plot_w / 2:.0f}",
        "title_y": height - 6,
        "polyline": " ".join(line) if len(line) > 1 else "",
        "points": dots,
    }


def rung_row(rung: Mapping[str, Any]) -> dict[str, Any]:
    """A rung's table row: plain text."""
    slowest = rung.get("slowest_group")
    return {
        "size": str(rung.get("size")),
        "groups": f"{rung.get('completed')} of {rung.get('group_count')} completed",
        "iteration": figure(rung.get("median_iteration_ms"), " ms"),
        "per_node": figure(rung.get("samples_per_second_per_node"), " samples/s"),
        "efficiency": "" if rung.get("efficiency") is None else f"{rung['efficiency']:.3f}",
        "slowest": _clip(", ".join(slowest)) if slowest else "",
        "spread": "" if rung.get("spread") is None else f"{rung['spread']:.3f}x",
        "left_out": _clip(", ".join(rung.get("left_out") or ())),
        "reports": [(_report(g), _clip(", ".join(g.get("nodes") or ()))) for g in rung.get("groups") or ()],
    }


def _opening(opening: Any) -> dict[str, str] | None:
    """The opening run of every node: its status, what it named and the link to its report."""
    if not isinstance(opening, Mapping):
        return None
    named = ", ".join(str(_dict(e).get("node")) for e in opening.get("named") or ())
    return {
        "nodes": str(opening.get("nodes")),
        "status": _clip(opening.get("status")),
        "named": _clip(named or "nobody"),
        "href": _report(opening),
    }


def page_model(campaign: Mapping[str, Any]) -> dict[str, Any]:
    verdict = _dict(campaign.get("verdict"))
    named = [str(entry.get("node")) for entry in campaign.get("named") or ()]
    return {
        "campaign_id": _clip(campaign.get("campaign_id")),
        "verdict": "PASS" if verdict.get("verdict") == "PASS" else "FAIL",
        "reasons": [_clip(r) for r in verdict.get("reasons") or ()],
        "nodes": len(campaign.get("nodes") or ()),
        "seed": str(campaign.get("seed")),
        "named": [
            {
                "node": _clip(e.get("node")),
                "rung": str(e.get("rung")),
                "kind": _clip(e.get("kind")),
                "evidence": _clip(e.get("evidence")),
            }
            for e in (_dict(e) for e in campaign.get("named") or ())
        ],
        "suspects": [
            _clip(f"one of {', '.join(s.get('nodes') or ())}: {s.get('why')}") for s in campaign.get("suspects") or ()
        ],
        "notes": [_clip(n) for n in campaign.get("notes") or ()],
        "opening": _opening(campaign.get("opening")),
        "curve": curve_model(campaign.get("rungs") or (), named),
        "rungs": [rung_row(r) for r in campaign.get("rungs") or ()],
    }


def render_html(campaign: Mapping[str, Any]) -> str:
    """scaling.html of ``campaign`` (campaign.json's document)."""
    return render("scaling.html", page_model(campaign))
