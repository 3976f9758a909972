# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""index.html's Jinja2 template, loaded by pages/_html as 'index.html' (autoescape, StrictUndefined).

Private to this collection; controller side. The model it reads is _history_page.page_model: plain
text, numbers and SVG geometry, every value escaped here. No JavaScript: the trends are inline SVG
with hover titles. The table fits a 1400-pixel window: long cells (run ids, images, reasons, the
files) wrap.
"""

from __future__ import annotations

PAGE = r"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>Aorta runs</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td{white-space:nowrap}
td.w{white-space:normal;max-width:24em;overflow-wrap:anywhere}
th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.COMPLETED,.PASS{color:#176f2c;font-weight:600}
.FAILED,.FAIL{color:#b3261e;font-weight:600}
.TIMEOUT,.STOPPED{color:#a15c00;font-weight:600}
.small{font-size:12px;color:#555}
section{margin:1.5em 0}
svg{background:#fafafa;border:1px solid #ddd;margin-right:1em}
svg text{font-size:11px;fill:#333}
svg .axis{stroke:#888;fill:none}
svg .line{fill:none;stroke:#3a6ea5;stroke-width:1.2}
svg circle{fill:#3a6ea5}
svg circle.bad{fill:#b3261e}
</style></head><body>
{%- macro some(items) -%}
{%- for item in items.shown %}{% if not loop.first %}<br>{% endif %}{{ item }}{% endfor -%}
{%- if items.more %}<br><span class=small>and {{ items.more }} more</span>{% endif -%}
{%- endmacro -%}
{%- macro trend(c) -%}
<svg width="{{ c.width }}" height="{{ c.height }}" role="img" aria-label="{{ c.label }}">
<path class=axis d="{{ c.axis }}"/>
{%- for y, text in c.ticks %}<text x="{{ c.tick_x }}" y="{{ y }}" text-anchor="end">{{ text }}</text>{% endfor -%}
<text transform="{{ c.title_at }}" text-anchor="middle">{{ c.label }}</text>
{%- for x, y, anchor, text in c.texts %}<text x="{{ x }}" y="{{ y }}"
{%- if anchor %} text-anchor="{{ anchor }}"{% endif %}>{{ text }}</text>{% endfor -%}
{%- if c.polyline %}<polyline class=line points="{{ c.polyline }}"/>{% endif -%}
{%- for p in c.points -%}
{%- if p.href %}<a href="{{ p.href }}">{% endif -%}
<circle cx="{{ p.x }}" cy="{{ p.y }}" r="3"{% if p.bad %} class=bad{% endif %}><title>{{ p.tip }}</title></circle>
{%- if p.href %}</a>{% endif -%}
{%- endfor -%}
</svg>
{%- endmacro %}
<h1>Aorta runs</h1><p>{{ runs }}, newest first; {{ fingerprints }} (runs of one fingerprint are comparable:
same nodes, image, GPUs per node, ROCm, amdgpu and effective config). Written {{ written }}.</p>
{%- if campaigns %}
<h2>Scaling campaigns</h2>
<table><thead><tr>{% for h in campaign_headers %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{%- for c in campaigns %}
<tr><td>{{ c.start }}</td>
<td class=w>{% if c.href %}<a href="{{ c.href }}">{{ c.campaign_id }}</a>{% else %}{{ c.campaign_id }}{% endif %}</td>
<td><span class="{{ c.status }}">{{ c.status }}</span></td>
<td class=w>{% if c.verdict %}<span class="{{ c.verdict }}">{{ c.verdict }}</span>{% endif -%}
{% if c.reasons.shown %}<br><span class=small>{{ some(c.reasons) }}</span>{% endif %}</td>
<td class=n>{{ c.nodes }}</td><td class=w>{{ c.rungs }}</td><td class=n>{{ c.rate }}</td>
<td class=n>{{ c.efficiency }}</td><td class=w>{{ some(c.named) }}</td>
<td class=w>
{%- for href, label in c.files %}{% if not loop.first %} {% endif %}<a href="{{ href }}">{{ label }}</a>{% endfor -%}
</td></tr>
{%- endfor %}
</tbody></table>
{%- endif %}
<h2>Trends per fingerprint, the newest first</h2>
{%- for g in groups %}
<section id="fp-{{ g.id }}"><h3>fingerprint {{ g.id }}: {{ g.runs }}</h3><p class=small>{{ g.summary }}</p>
{%- for c in g.charts -%}
{% if c.points %}{{ trend(c) }}{% else %}<p class=small>{{ c.empty }}</p>{% endif %}
{%- endfor -%}
</section>
{%- endfor %}
<h2>Runs</h2><table><thead><tr>{% for h in headers %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{%- for r in rows %}
<tr><td>{{ r.start }}</td>
<td class=w>{% if r.href %}<a href="{{ r.href }}">{{ r.run_id }}</a>{% else %}{{ r.run_id }}{% endif %}</td>
<td><span class="{{ r.status }}">{{ r.status }}</span></td>
<td class=w>{% if r.verdict %}<span class="{{ r.verdict }}">{{ r.verdict }}</span>{% endif -%}
{% if r.reasons.shown %}<br><span class=small>{{ some(r.reasons) }}</span>{% endif %}</td>
<td class=n>{{ r.nodes }} × {{ r.gpus }}</td><td class=w>{{ r.image }}<br><span class=small>{{ r.image_id }}</span></td>
<td class=n>{{ r.throughput }}{% if r.tokens %}<br><span class=small>{{ r.tokens }}</span>{% endif %}</td>
<td class=n>{{ r.step }}</td><td class=n>{{ r.iteration }}</td>
<td class=w>{{ some(r.slow) }}</td><td class=w>{{ some(r.drift) }}</td>
<td><a href="#fp-{{ r.fp_id }}">{{ r.fp_id }}</a></td>
<td class=w>
{%- for href, label in r.files %}{% if not loop.first %} {% endif %}<a href="{{ href }}">{{ label }}</a>{% endfor -%}
</td></tr>
{%- endfor %}
</tbody></table>
</body></html>
"""
