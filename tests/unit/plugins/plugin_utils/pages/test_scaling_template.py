# SPDX-License-Identifier: GPL-3.0-or-later
"""scaling.html's template: nothing in it bypasses the escaping, it carries no script, and it
renders from the model with nothing undefined (StrictUndefined), for a campaign with no rung."""

from __future__ import annotations

import re

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _html, _scaling_page, _scaling_template


def test_nothing_bypasses_the_escaping_and_there_is_no_script():
    assert not re.search(r"\|\s*safe\b|autoescape\s+false|Markup", _scaling_template.PAGE)
    assert "<script" not in _scaling_template.PAGE.lower() and not re.search(r"\son\w+=", _scaling_template.PAGE)


def test_it_renders_from_the_model_alone():
    campaign = {"campaign_id": "c", "seed": 0, "nodes": [], "verdict": {"verdict": "PASS", "reasons": []}}
    page = _html.render("scaling.html", _scaling_page.page_model(campaign))
    assert '<span class="PASS">PASS</span>' in page and "<h2>Nodes named</h2><p>none</p>" in page
