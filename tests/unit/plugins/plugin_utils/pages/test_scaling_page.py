# SPDX-License-Identifier: GPL-3.0-or-later
"""scaling.html from a campaign simulated on 8 nodes with one slow node: the named node first with
its evidence, the efficiency curve (a dot per group, red where a named node ran, linked to the
group's report), a row per rung and a link to every group's report."""

from __future__ import annotations

import math
from html.parser import HTMLParser

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _rungs
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _scaling_page

NODES = [f"node-{i}" for i in range(8)]
SLOW = "node-5"


def campaign(opening: bool = False) -> dict:
    """A whole campaign of 8 nodes (_rungs.campaign), node-5 1.6x slow, each group at 100 samples/s
    per node less 4 % per doubling (the fabric's cost), the slow node's groups at its pace."""

    def run_groups(label, groups):
        runs = []
        for number, group in enumerate(groups):
            pace = (1.6 if SLOW in group else 1.0) * (1 + 0.04 * math.log2(len(group)))
            runs.append(
                {
                    "nodes": group,
                    "dir": f"{label}/g{number}",
                    "run_id": f"c-{label}-g{number}",
                    "status": "COMPLETED",
                    "iteration_ms": 100.0 * pace,
                    "samples_per_second": 100.0 * len(group) / pace,
                }
            )
        return runs

    settings = {"aorta_scaling_seed": 1, "aorta_scaling_opening": opening}
    return _rungs.campaign("camp", NODES, settings, run_groups)


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.circles, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.links.append(attrs["href"])
        if tag == "circle":
            self.circles.append(attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_the_named_node_comes_first_then_the_curve_the_rungs_and_every_report():
    doc = campaign()
    assert [e["node"] for e in doc["named"]] == [SLOW] and [r["size"] for r in doc["rungs"]] == [1, 2, 4, 7]
    page = _scaling_page.render_html(doc)
    parsed = Page()
    parsed.feed(page)
    text = " ".join(parsed.text)
    # The verdict's reason names it at once; the table of named nodes holds its evidence next.
    assert text.index(f"named 1 node: {SLOW}") < text.index("Nodes named")
    named_at = text.index("Nodes named")
    assert named_at < text.index(SLOW, named_at) < text.index("Weak scaling") < text.index("Rungs")
    assert "alone 1.6x the rung's median iteration" in text
    groups = [g for r in doc["rungs"] for g in r["groups"]]
    assert len(parsed.circles) == len(groups) == 8 + 3 + 1 + 1  # 7 nodes left after rung 1: 3 pairs, a four, all
    # Red only where the named node ran: rung 1's own group; it left the campaign after it.
    assert sum(c.get("class") == "bad" for c in parsed.circles) == 1
    assert sorted(set(parsed.links)) == sorted({f"{g['dir']}/report.html" for g in groups})
    # Efficiency falls with the fabric's cost per doubling: the top rung's median below rung 2's.
    efficiency = [r["efficiency"] for r in doc["rungs"]]
    assert efficiency[0] == 1.0 and efficiency[1] > efficiency[2] > efficiency[3]


def test_the_opening_run_is_said_with_a_link_to_its_report():
    parsed = Page()
    parsed.feed(_scaling_page.render_html(campaign(opening=True)))
    text = " ".join(parsed.text)
    assert "Opening run of every node (8): COMPLETED, named nobody" in text
    assert "opening/g0/report.html" in parsed.links
    assert text.index("Opening run") < text.index("Weak scaling")
