# SPDX-License-Identifier: GPL-3.0-or-later
"""index.html's model and page, rendered by the report's Jinja2 environment: a trend point per run,
small at 1000 runs."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _history_page as history_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _fingerprint as fpr

REPO = Path(__file__).resolve().parents[5]


SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


START = SAMPLE["started_epoch"]


OTHER_IMAGE = "sha256:" + "cd" * 32


class Page(HTMLParser):
    """What a test reads of a page: tags, links, the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for name, value in attrs if name == "href" and value]

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def test_render_html_trend_points_link_each_run():
    rows = [
        {
            "run_id": f"r{i}",
            "started_epoch": START + i,
            "status": "COMPLETED",
            "step_time_ms": 100.0 + i,
            "samples_per_second": 50.0 - i,
            "links": {"report": f"r{i}/report.html"},
            "fingerprint": fpr.fingerprint(SAMPLE),
            "fingerprint_id": "f1",
        }
        for i in range(5)
    ]
    page = parse(history_page.render_html(rows))
    assert page.tags.count("circle") == 10
    # The run id and the files column in the table, a point in each trend.
    assert page.links.count("r3/report.html") == 4
    assert history_page.render_html([]).startswith("<!DOCTYPE html>")


def test_page_stays_small_with_1000_runs_each_its_own_fingerprint():
    rows = [
        {
            "run_id": f"2026{i:06d}",
            "started_epoch": START + i,
            "status": "COMPLETED",
            "verdict": {"verdict": "PASS", "reasons": []},
            "nodes": 64,
            "gpus_per_node": 8,
            "image": "rocm/pytorch:latest",
            "image_id": OTHER_IMAGE,
            "step_time_ms": 100.0 + i % 7,
            "samples_per_second": 1000.0,
            "slow_nodes": [f"node-{i}"],
            "straggler_ranks": [i % 512],
            "links": {"report": f"2026{i:06d}/report.html", "run_json": f"2026{i:06d}/run.json"},
            "fingerprint": {**fpr.fingerprint(SAMPLE), "nodes": [f"mi300x-{n:04d}" for n in range(64)]},
            "fingerprint_id": f"{i:012d}",
        }
        for i in range(1000)
    ]
    assert len(history_page.render_html(rows).encode()) < 5_000_000
