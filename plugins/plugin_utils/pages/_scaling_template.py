# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""scaling.html's Jinja2 template, loaded by pages/_html as 'scaling.html' (autoescape,
StrictUndefined).

Private to this collection; controller side. The model it reads is _scaling_page.page_model: plain
text, numbers and SVG geometry, every value escaped here. No JavaScript: the curve is inline SVG
with hover titles, each dot a link to its group's report.
"""

from __future__ import annotations

PAGE = r"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>Aorta scaling campaign {{ campaign_id }}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1360px}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td.w{max-width:40em;overflow-wrap:anywhere}
th{background:#f3f3f3}
.PASS{color:#176f2c;font-weight:600}
.FAIL{color:#b3261e;font-weight:600}
.small{font-size:12px;color:#555}
svg{background:#fafafa;border:1px solid #ddd}
svg text{font-size:11px;fill:#333}
svg .axis{stroke:#888;fill:none}
svg .line{fill:none;stroke:#3a6ea5;stroke-width:1.2}
svg circle{fill:#3a6ea5;fill-opacity:.7}
svg circle.bad{fill:#b3261e;fill-opacity:1}
</style></head><body>
<h1>Scaling campaign {{ campaign_id }}: <span class="{{ verdict }}">{{ verdict }}</span></h1>
<p>{{ nodes }} nodes; groups drawn with seed {{ seed }}.</p>
{%- if reasons %}<ul>{% for r in reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
<h2>Nodes named</h2>
{%- if named %}
<table><tr><th>node</th><th>rung</th><th>finding</th><th>evidence</th></tr>
{%- for n in named %}<tr><td>{{ n.node }}</td><td>{{ n.rung }}</td><td>{{ n.kind }}</td>
<td class=w>{{ n.evidence }}</td></tr>{% endfor %}
</table>
{%- else %}<p>none</p>{% endif %}
{%- if suspects %}<h3>Slow, not put on one node</h3>
<ul>{% for s in suspects %}<li>{{ s }}</li>{% endfor %}</ul>{% endif %}
{%- if notes %}<h3>Notes</h3><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
{%- if opening %}<p>Opening run of every node ({{ opening.nodes }}): {{ opening.status }}, named {{ opening.named }}
{%- if opening.href %} (<a href="{{ opening.href }}">its report</a>){% endif %}.</p>{% endif %}
<h2>Weak scaling</h2>
{%- set c = curve %}
<svg width="{{ c.width }}" height="{{ c.height }}" role="img" aria-label="{{ c.label }}">
<path class=axis d="{{ c.axis }}"/>
{%- for y, text in c.ticks %}<text x="{{ c.tick_x }}" y="{{ y }}" text-anchor="end">{{ text }}</text>{% endfor -%}
{%- for x, y, text in c.sizes %}<text x="{{ x }}" y="{{ y }}" text-anchor="middle">{{ text }}</text>{% endfor -%}
<text x="{{ c.title_x }}" y="{{ c.title_y }}" text-anchor="middle">nodes per group; {{ c.label }}</text>
{%- if c.polyline %}<polyline class=line points="{{ c.polyline }}"/>{% endif -%}
{%- for p in c.points -%}
{%- if p.href %}<a href="{{ p.href }}">{% endif -%}
<circle cx="{{ p.x }}" cy="{{ p.y }}" r="4"{% if p.bad %} class=bad{% endif %}><title>{{ p.tip }}</title></circle>
{%- if p.href %}</a>{% endif -%}
{%- endfor -%}
</svg>
<h2>Rungs</h2>
<table><tr><th>nodes per group</th><th>groups</th><th>median iteration</th><th>throughput per node</th>
<th>efficiency</th><th>slowest group</th><th>spread</th><th>sat out</th></tr>
{%- for r in rungs %}<tr><td>{{ r.size }}</td><td>{{ r.groups }}</td><td>{{ r.iteration }}</td>
<td>{{ r.per_node }}</td><td>{{ r.efficiency }}</td><td class=w>{{ r.slowest }}</td><td>{{ r.spread }}</td>
<td class=w>{{ r.left_out }}</td></tr>{% endfor %}
</table>
<h2>Every group's report</h2>
{%- for r in rungs %}<p><b>{{ r.size }} per group:</b>
{%- for href, nodes in r.reports %} {% if href %}<a href="{{ href }}">{{ nodes }}</a>{% else %}{{ nodes }}{% endif %}
{%- if not loop.last %} ·{% endif %}{% endfor %}</p>
{%- endfor %}
</body></html>"""
