# SPDX-License-Identifier: GPL-3.0-or-later
"""index.html's template: nothing in it bypasses the escaping, it carries no script, and it renders
from the model with nothing undefined (StrictUndefined), with no run and with one."""

from __future__ import annotations

import re

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _history_page, _history_template, _html


def test_nothing_bypasses_the_escaping_and_there_is_no_script():
    assert not re.search(r"\|\s*safe\b|autoescape\s+false|Markup", _history_template.PAGE)
    assert "<script" not in _history_template.PAGE.lower() and not re.search(r"\son\w+=", _history_template.PAGE)


def test_it_renders_from_the_model_alone():
    empty = _html.render("index.html", _history_page.page_model([]))
    assert "0 runs, newest first; 0 fingerprints" in empty and "<tbody>\n</tbody>" in empty
    row = {"run_id": "r1", "status": "COMPLETED", "fingerprint": {}, "fingerprint_id": "f1", "links": {}}
    one = _history_page.render_html([row])
    assert "<td class=w>r1</td>" in one and "no step time measured" in one and "no throughput known" in one
