# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The results root's index.html: per fingerprint a trend of step time and throughput (inline SVG),
then a table of every run, newest first; self-contained, no JavaScript.

Private to this collection; controller side. ``page_model`` turns the history's rows (results/
_history) into plain text, numbers and SVG geometry; the page is rendered by the one Jinja2
environment (pages/_html: autoescape, StrictUndefined) from _history_template, as report.html is:
a run id, an image or a reason with '<' in it stays text.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names, plural, utc
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._html import render
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._fingerprint import short_id, text_of

# What the page shows at most of one run's lists (reasons, drift, slow nodes): the rest is counted.
SHOWN = 3
MAX_TEXT = 160
LINKS = (("report", "report"), ("run_json", "run.json"), ("junit", "junit.xml"))
HEADERS = (
    "start (UTC)",
    "run",
    "status",
    "verdict",
    "nodes × GPUs",
    "image",
    "throughput",
    "step time",
    "CVS iteration (profiled window)",
    "slow nodes and ranks",
    "drift",
    "fingerprint",
    "files",
)
CAMPAIGN_HEADERS = (
    "start (UTC)",
    "campaign",
    "status",
    "verdict",
    "nodes (left)",
    "rungs",
    "rung 1 per node",
    "top rung efficiency",
    "nodes named",
    "files",
)
CAMPAIGN_LINKS = (("page", "scaling page"), ("campaign_json", "campaign.json"), ("junit", "junit.xml"))
# The trend's frame: width, height, and the margins left, right, top and bottom (pixels).
FRAME = (570, 190, 74, 12, 10, 44)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _date(epoch: Any) -> str:
    return utc(epoch, "start unknown")


def _href(link: str) -> str:
    return urllib.parse.quote(link, safe="/")


def figure(value: Any, unit: str = "") -> str:
    """A figure as the page prints it: three significant digits, thousands grouped, G and M above a
    million; '' when not a number."""
    number = _number(value)
    if number is None:
        return ""
    size = abs(number)
    if size >= 1e9:
        text = f"{number / 1e9:,.2f} G"
    elif size >= 1e6:
        text = f"{number / 1e6:,.2f} M"
    else:
        text = f"{number:,.0f}" if size >= 1000 else f"{number:,.3g}" if size < 10 else f"{number:,.1f}"
    return f"{text}{unit}"


def _clip(text: Any, limit: int = MAX_TEXT) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def _some(items: Sequence[Any]) -> dict[str, Any]:
    """At most SHOWN items, each clipped, and how many more."""
    return {"shown": [_clip(i) for i in items[:SHOWN]], "more": max(len(items) - SHOWN, 0)}


def _link(row: Mapping[str, Any]) -> str:
    """The run's best page: its report, else its run.json; '' when neither exists."""
    links = _dict(row.get("links"))
    return str(links.get("report") or links.get("run_json") or "")


def row_model(row: Mapping[str, Any]) -> dict[str, Any]:
    """One run's table row: plain text the template lays out."""
    verdict = _dict(row.get("verdict"))
    links = _dict(row.get("links"))
    slow = [f"node {n}" for n in row.get("slow_nodes") or ()] + [f"rank {r}" for r in row.get("straggler_ranks") or ()]
    gpus = row.get("gpus_per_node")
    tokens = row.get("tokens_per_second")
    return {
        "start": _date(row.get("started_epoch")).removesuffix(" UTC"),
        "run_id": str(row.get("run_id")),
        "href": _href(_link(row)) if _link(row) else "",
        "status": str(row.get("status")),
        "verdict": str(verdict.get("verdict") or ""),
        "reasons": _some([str(r) for r in verdict.get("reasons") or ()]),
        "nodes": str(row.get("nodes")),
        "gpus": str(gpus if gpus is not None else "?"),
        "image": _clip(row.get("image")),
        "image_id": short_id(row.get("image_id")),
        "throughput": figure(row.get("samples_per_second"), " samples/s"),
        "tokens": figure(tokens, " tokens/s") if tokens is not None else "",
        "step": figure(row.get("step_time_ms"), " ms"),
        "iteration": figure(row.get("iteration_time_ms"), " ms"),
        "slow": _some(slow),
        "drift": _some(list(row.get("drift_lines") or ())),
        "fp_id": str(row.get("fingerprint_id")),
        "files": [(_href(str(links[key])), label) for key, label in LINKS if links.get(key)],
    }


def campaign_model(row: Mapping[str, Any]) -> dict[str, Any]:
    """One scaling campaign's table row (results/_history.campaign_entry): plain text."""
    verdict = _dict(row.get("verdict"))
    links = _dict(row.get("links"))
    efficiency = _number(row.get("top_efficiency"))
    return {
        "start": _date(row.get("started_epoch")).removesuffix(" UTC"),
        "campaign_id": str(row.get("campaign_id")),
        "href": _href(str(links["page"])) if links.get("page") else "",
        "status": str(row.get("status")),
        "verdict": str(verdict.get("verdict") or ""),
        "reasons": _some([str(r) for r in verdict.get("reasons") or ()]),
        "nodes": f"{row.get('nodes')} ({row.get('left')})",
        "rungs": _clip(", ".join(str(size) for size in row.get("sizes") or ()) or "none"),
        "rate": figure(row.get("per_node_rate"), " samples/s"),
        "efficiency": f"{efficiency:.2f}" if efficiency is not None else "",
        "named": _some([str(n) for n in row.get("named") or ()]),
        "files": [(_href(str(links[key])), label) for key, label in CAMPAIGN_LINKS if links.get(key)],
    }


def trend_model(points: Sequence[tuple[Mapping[str, Any], float]], label: str, unit: str) -> dict[str, Any]:
    """The geometry of an inline SVG of ``points`` (row, value), oldest first: the value (``label``
    in ``unit``) of each run in start order, each point a link to the run's page with a tooltip."""
    width, height, left, right, top, bottom = FRAME
    values = [v for _row, v in points]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9 * max(abs(hi), 1.0):
        lo, hi = lo - max(abs(lo) * 0.05, 0.5), hi + max(abs(hi) * 0.05, 0.5)
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> str:
        return f"{left + (plot_w * (i + 0.5) / len(points)):.1f}"

    def y(v: float) -> str:
        return f"{top + plot_h * (1 - (v - lo) / (hi - lo)):.1f}"

    first, last = _date(points[0][0].get("started_epoch")), _date(points[-1][0].get("started_epoch"))
    texts = [(str(left), top + plot_h + 14, "", first)]
    if len(points) > 1:
        texts.append((str(left + plot_w), top + plot_h + 14, "end", last))
    texts.append(
        (f"{left + plot_w / 2:.0f}", height - 6, "middle", f"runs in start order (UTC), {len(points)} plotted")
    )
    dots = []
    for i, (row, value) in enumerate(points):
        tip = " \u00b7 ".join((str(row.get("run_id")), _date(row.get("started_epoch")), f"{figure(value)} {unit}"))
        link = _link(row)
        dots.append(
            {
                "x": x(i),
                "y": y(value),
                "bad": row.get("status") != "COMPLETED",
                "tip": f"{tip} \u00b7 {row.get('status')}",
                "href": _href(link) if link else "",
            }
        )
    return {
        "width": width,
        "height": height,
        "label": f"{label} ({unit})",
        "axis": f"M{left} {top}V{top + plot_h}H{left + plot_w}",
        "tick_x": left - 4,
        "ticks": [(f"{float(y(t)) + 4:.1f}", figure(t)) for t in (lo, (lo + hi) / 2, hi)],
        "title_at": f"translate(14 {top + plot_h / 2:.0f}) rotate(-90)",
        "texts": texts,
        "polyline": " ".join(f"{x(i)},{y(v)}" for i, (_row, v) in enumerate(points)) if len(points) > 1 else "",
        "points": dots,
    }


def _summary(fp: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """What a fingerprint is, in a line; its config as the newest run ``row`` was given it (the base
    config and overrides) where the fingerprint holds the effective config."""
    config = _dict(fp.get("config"))
    effective = config.get("effective")
    if isinstance(effective, Mapping):
        config = _dict(row.get("config"))
    overrides = [f"{k}={v}" for k, v in _dict(config.get("overrides")).items()]
    nodes = list(fp.get("nodes") or ())
    parts = [
        f"image {short_id(fp.get('image_id'))}",
        f"{len(nodes)} nodes ({first_names(nodes, SHOWN)})",
        f"{text_of(fp.get('gpus_per_node'))} GPUs per node",
        f"ROCm {text_of(fp.get('rocm'))}",
        f"amdgpu {text_of(fp.get('amdgpu'))}",
        f"config {text_of(config.get('base_config'))}"
        + (f" with {first_names(overrides, 8)}" if overrides else " without overrides")
        + (f" (effective config compared: {plural(len(effective), 'key')})" if isinstance(effective, Mapping) else ""),
    ]
    return _clip(" \u00b7 ".join(parts), 4 * MAX_TEXT)


def group_model(fp_id: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A fingerprint's section: what it is, and its runs' step time and throughput over time."""
    oldest_first = list(reversed(rows))
    steps = [(r, float(r["step_time_ms"])) for r in oldest_first if _number(r.get("step_time_ms")) is not None]
    tokens = any(_number(r.get("tokens_per_second")) is not None for r in rows)
    key, unit = ("tokens_per_second", "tokens/s") if tokens else ("samples_per_second", "samples/s")
    rate = [(r, float(r[key])) for r in oldest_first if _number(r.get(key)) is not None]
    charts = [
        trend_model(steps, "step time", "ms") if steps else {"points": [], "empty": "no step time measured"},
        trend_model(rate, "throughput", unit) if rate else {"points": [], "empty": "no throughput known"},
    ]
    return {
        "id": fp_id,
        "runs": plural(len(rows), "run"),
        "summary": _summary(_dict(rows[0].get("fingerprint")), rows[0]),
        "charts": charts,
    }


def page_model(rows: Sequence[Mapping[str, Any]], campaigns: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Everything index.html shows, from the history's ``rows`` and ``campaigns``, newest first."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("fingerprint_id")), []).append(row)
    return {
        "runs": plural(len(rows), "run"),
        "fingerprints": plural(len(groups), "fingerprint"),
        "written": _date(time.time()),
        "groups": [group_model(fp_id, members) for fp_id, members in groups.items()],
        "headers": HEADERS,
        "rows": [row_model(row) for row in rows],
        "campaign_headers": CAMPAIGN_HEADERS,
        "campaigns": [campaign_model(row) for row in campaigns],
    }


def render_html(rows: Sequence[Mapping[str, Any]], campaigns: Sequence[Mapping[str, Any]] = ()) -> str:
    """index.html of the history's ``rows`` and scaling ``campaigns`` (each newest first)."""
    return render("index.html", page_model(rows, campaigns))
