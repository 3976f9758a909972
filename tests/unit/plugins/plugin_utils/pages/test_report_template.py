# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's template: autoescaped, strict about what it is given, well-formed markup."""

from __future__ import annotations

import html.parser

import jinja2
import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _html, _report_page, _report_template
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report, _run_facts


class Tags(html.parser.HTMLParser):
    """Every element opened and closed, so that a template slip (an unclosed table) shows."""

    VOID = frozenset({"meta", "br", "img", "rect", "line", "input"})

    def __init__(self):
        super().__init__()
        self.open: list = []
        self.ids: list = []

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()


def test_a_name_with_markup_stays_text_everywhere_on_the_page(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 80, 50], bad_file=False)))
    evil = "<script>alert(1)</script>"
    for r in report["per_rank_summary"]:
        r["node"] = evil + r["node"]
    report["warnings"] = ["a warning with <b>markup</b> & an ampersand"]
    page = _report_page.render_html(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a warning with &lt;b&gt;markup&lt;/b&gt; &amp; an ampersand" in page
    parser = Tags()
    parser.feed(page)
    assert parser.open == []  # everything opened was closed, in order
    assert len(parser.ids) == len(set(parser.ids))  # ids are unique: a test or a link can find each


def test_the_template_compiles_with_autoescape_and_refuses_a_missing_value():
    env = _html.environment().get_template("report.html").environment
    assert env.autoescape is True
    with pytest.raises(jinja2.UndefinedError):
        env.from_string(_report_template.PAGE).render({})


def test_a_page_with_slow_links_the_sweep_and_collectives_against_the_fabric_stays_valid(tmp_path, fixtures_dir):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json.gz").write_bytes(
        (fixtures_dir / "traces" / "nccl" / "nccl-data.json.gz").read_bytes()
    )
    report = _report.build_report(str(tmp_path / "t"), include_unlinked_kernels=True)
    sweep = {"ran": True, "tool": "tcp", "median_gbps": 3.8, "slow": []}
    sweep["slow"] = [
        {"node": f"<b>n{i}</b>", "rank": i, "direction": "both", "send_gbps": 0.2, "recv_gbps": 0.3, "ratio": 0.05}
        for i in range(10)
    ]
    report.update(_run_facts.fabric_findings({"fabric_sweep": sweep}, report))
    page = _report_page.render_html(report)
    assert "&lt;b&gt;n0&lt;/b&gt;: fabric 0.2 Gbit/s sent, 0.3 Gbit/s received" in page and "<b>n0</b>" not in page
    parser = Tags()
    parser.feed(page)
    assert parser.open == [] and len(parser.ids) == len(set(parser.ids))
    assert [i for i in parser.ids if i.startswith("slow-link")] == [f"slow-link-{n}" for n in range(1, 9)] + [
        "slow-link-more"
    ]
    assert "<th>of fabric</th>" in page and "<script" not in page  # a table and words: no JavaScript needed
