# SPDX-License-Identifier: GPL-3.0-or-later
"""The words both sides print: counts, the first names and how many more, times in UTC."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names, plural, utc


def test_a_count_takes_its_noun():
    assert plural(1, "node") == "1 node" and plural(0, "node") == "0 nodes"
    assert plural(2, "fabric check", "fabric checks") == "2 fabric checks"


def test_the_first_names_then_how_many_more_stays_one_short_line_at_1000_nodes():
    names = [f"node-{i}" for i in range(1000)]
    assert first_names(names, 3) == "node-0, node-1, node-2 and 997 more"
    assert first_names(names[:3], 3) == "node-0, node-1, node-2"
    assert first_names(names[:2], 5, total=40) == "node-0, node-1 and 38 more"
    assert first_names([], 3) == ""
    assert len(first_names(names, 5)) < 80


def test_a_time_is_utc_or_the_word_for_unknown():
    assert utc(0) == "1970-01-01 00:00:00 UTC"
    assert utc(None, "start unknown") == "start unknown" and utc(True) == ""
