# SPDX-License-Identifier: GPL-3.0-or-later
"""The one Jinja2 environment every page is rendered by: autoescape, StrictUndefined, each template
compiled once; a value with markup in it stays text in report.html, index.html and scaling.html alike."""

from __future__ import annotations

import jinja2
import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _history_page, _html, _scaling_page

EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_one_environment_escapes_and_refuses_a_name_the_model_lacks():
    env = _html.environment()
    assert env is _html.environment() and env.autoescape is True and env.undefined is jinja2.StrictUndefined
    assert set(_html.TEMPLATES) == {"views.svg", "report.html", "index.html", "scaling.html"}
    assert env.get_template("index.html") is env.get_template("index.html")  # compiled once
    with pytest.raises(jinja2.UndefinedError):
        _html.render("index.html", {})


def test_an_injection_in_any_field_of_the_history_stays_text():
    row = {
        "run_id": EVIL,
        "started_epoch": 1796000000,
        "status": EVIL,
        "verdict": {"verdict": EVIL, "reasons": [EVIL] * 5},
        "nodes": EVIL,
        "gpus_per_node": EVIL,
        "image": EVIL,
        "image_id": EVIL,
        "step_time_ms": 10.0,
        "samples_per_second": 5.0,
        "slow_nodes": [EVIL],
        "straggler_ranks": [EVIL],
        "drift_lines": [EVIL],
        "links": {"report": f'{EVIL}"/report.html', "run_json": "a b/run.json"},
        "fingerprint": {"nodes": [EVIL], "image_id": EVIL, "config": {"base_config": EVIL}},
        "fingerprint_id": EVIL,
    }
    page = _history_page.render_html([row])
    assert "<script>" not in page and "<img" not in page and "onerror=alert(2)>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Links are quoted, then escaped: a quote cannot close the attribute.
    assert 'href="a%20b/run.json"' in page and '%22/report.html"' in page
    assert "and 2 more" in page  # five reasons: three shown, two counted


def test_an_injection_in_any_field_of_a_scaling_campaign_stays_text():
    group = {"nodes": [EVIL], "status": EVIL, "dir": f'{EVIL}"k1/g0', "samples_per_second_per_node": 5.0}
    rung = {"size": 1, "groups": [group], "completed": 0, "group_count": 1, "left_out": [EVIL], "slowest_group": [EVIL]}
    campaign = {
        "campaign_id": EVIL,
        "seed": EVIL,
        "nodes": [EVIL],
        "verdict": {"verdict": EVIL, "reasons": [EVIL]},
        "named": [{"node": EVIL, "rung": EVIL, "kind": EVIL, "evidence": EVIL}],
        "suspects": [{"nodes": [EVIL], "why": EVIL}],
        "notes": [EVIL],
        "rungs": [dict(rung, samples_per_second_per_node=5.0, efficiency=1.0)],
    }
    page = _scaling_page.render_html(campaign)
    assert "<script>" not in page and "<img" not in page and "onerror=alert(2)>" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8
    assert '%22k1/g0/report.html"' in page  # quoted, then escaped: the quote cannot close the attribute
    assert '<span class="FAIL">FAIL</span>' in page  # a verdict that is not PASS reads FAIL
