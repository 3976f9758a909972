# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one way to render HTML: one Jinja2 environment (autoescape, StrictUndefined) over
the templates of report.html (with its SVG views), of the results root's index.html and of a
scaling campaign's scaling.html.

Private to this collection; controller side (Jinja2 ships with ansible-core). Every value arrives
as plain text or numbers, formatted by the page's model (_report_page, _history_page): the
templates only lay out, and a value with '<' in it stays text.
"""

from __future__ import annotations

from typing import Any

import jinja2

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import (
    _history_template,
    _report_template,
    _scaling_template,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._opening import fmt

TEMPLATES = {
    "views.svg": _report_template.VIEWS,
    "report.html": _report_template.PAGE,
    "index.html": _history_template.PAGE,
    "scaling.html": _scaling_template.PAGE,
}
_ENVIRONMENT = None


def environment() -> Any:
    """The environment, once per process (it compiles each template once: compiling costs more than
    rendering a small page)."""
    global _ENVIRONMENT  # noqa: PLW0603 - a cache
    if _ENVIRONMENT is None:
        loader = jinja2.DictLoader(TEMPLATES)
        _ENVIRONMENT = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        _ENVIRONMENT.filters["fmt"] = fmt
    return _ENVIRONMENT


def render(name: str, model: dict[str, Any]) -> str:
    """The page ``name`` (a key of TEMPLATES) of ``model``, with a final newline."""
    return environment().get_template(name).render(model) + "\n"


def render_svg(macro: str, geometry: dict) -> str:
    """One of report.html's SVG views on its own (heatmap, histogram, rank_bars): for tests and tools."""
    return str(getattr(environment().get_template("views.svg").module, macro)(geometry))
