# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's own parts: the notes on what the controller's Python lacks (plots, fast decoding)."""

from __future__ import annotations

import sys

from ansible_collections.aorta.cluster.plugins.module_utils import _decode, _render, _report


def test_a_python_without_matplotlib_or_msgspec_is_said_in_the_report(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    monkeypatch.setattr(_decode, "msgspec", None)
    tools = _report.tool_notes()
    assert tools["plots"] is False and tools["fast_decoder"] is False
    report = _report.build_report(str(tmp_path))
    report["tools"] = tools
    html = _render.render_html(report)
    assert "no plots: matplotlib is not installed" in html and "slow decoding: msgspec" in html
