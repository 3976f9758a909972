# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's Jinja2 template, loaded by pages/_html (autoescape, StrictUndefined; controller side).

Private to this collection. Kept as a Python string (no package data to find): VIEWS is loaded as
'views.svg', PAGE as 'report.html'. Every value arrives as plain text and is escaped here: a node
name or a kernel name with '<' in it stays text. The model it reads is _report_page.page_model; the
SVG geometry comes from _views. No JavaScript: the views are inline SVG with hover titles.
"""

from __future__ import annotations

# The inline SVG views, macros over _views' geometry (imported by the page; tests draw them alone).
VIEWS = r"""
{%- macro y_title(t) -%}
<text x='{{ t[0] }}' y='{{ t[1] }}' font-size='11' text-anchor='middle' transform='rotate(-90 {{ t[0] }} {{ t[1]
}})'>{{ t[2] }}</text>
{%- endmacro -%}

{%- macro heatmap(m) -%}
<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{{ m.width }}' height='{{ m.height }}' viewBox='0 0
{{ m.width }} {{ m.height }}'><title>{{ m.title }}</title>
<text x='{{ m.x_title[0] }}' y='11' font-size='11'>{{ m.x_title[1] }}</text>
{%- for x, label in m.columns %}<text x='{{ x }}' y='26' font-size='9' text-anchor='middle'>{{ label }}</text>
{%- endfor %}{{ y_title(m.y_title) }}
{%- if m.grid %}<rect x='{{ m.grid[0] }}' y='{{ m.grid[1] }}' width='{{ m.grid[2] }}' height='{{ m.grid[3] }}'
fill='#e4e4e4'/>{% endif %}
{%- for x, y, node in m.labels %}<text x='{{ x }}' y='{{ y }}' font-size='{{ m.font }}'
text-anchor='end'>{{ node }}</text>{% endfor %}
{%- for x, y, fill, hover in m.cells %}<rect x='{{ x }}' y='{{ y }}' width='{{ m.cell_w }}' height='{{ m.cell_h }}'
fill='{{ fill }}'><title>{{ hover }}</title></rect>{% endfor -%}
{%- for x, fill, words in m.legend %}<rect x='{{ x }}' y='{{ m.key_y }}' width='12' height='12' fill='{{ fill }}'
stroke='#888'/><text x='{{ x + 16 }}' y='{{ m.key_y + 10 }}' font-size='11'>{{ words }}</text>{% endfor -%}
</svg>
{%- endmacro -%}

{%- macro histogram(m) -%}
<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{{ m.width }}' height='{{ m.height }}' viewBox='0 0
{{ m.width }} {{ m.height }}'><title>{{ m.title }}</title>
<line x1='{{ m.left }}' y1='{{ m.plot_top }}' x2='{{ m.left }}' y2='{{ m.base }}' stroke='#888'/><line
x1='{{ m.left }}' y1='{{ m.base }}' x2='{{ m.right }}' y2='{{ m.base }}' stroke='#888'/>
{%- for x, y, h, hover in m.bars %}<rect x='{{ x }}' y='{{ y }}' width='{{ m.bar_w }}' height='{{ h }}'
fill='#3b7dd8'><title>{{ hover }}</title></rect>{% endfor -%}
<text x='{{ m.left - 4 }}' y='{{ m.plot_top + 8 }}' font-size='11' text-anchor='end'>{{ m.top }}</text><text
x='{{ m.left - 4 }}' y='{{ m.base }}' font-size='11' text-anchor='end'>0</text>{{ y_title(m.y_title) }}
<text x='{{ m.left }}' y='{{ m.base + 14 }}' font-size='11'>{{ m.low }}</text><text x='{{ m.right }}'
y='{{ m.base + 14 }}' font-size='11' text-anchor='end'>{{ m.high }}</text><text x='{{ (m.left + m.right) / 2 }}'
y='{{ m.base + 32 }}' font-size='11' text-anchor='middle'>{{ m.x_title }}</text></svg>
{%- endmacro -%}

{%- macro rank_bars(m) -%}
<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{{ m.width }}' height='{{ m.height }}' viewBox='0 0
{{ m.width }} {{ m.height }}'><title>Per-rank time breakdown, ms per step</title>
<line x1='{{ m.left }}' y1='10' x2='{{ m.left }}' y2='{{ m.axis_y }}' stroke='#888'/><text x='{{ m.left - 4 }}'
y='18' font-size='11' text-anchor='end'>{{ m.top }}</text><text x='{{ m.left - 4 }}' y='{{ m.axis_y }}'
font-size='11' text-anchor='end'>0</text>{{ y_title(m.y_title) }}
{%- for bar in m.bars %}
{%- for y, h, fill, hover in bar.segments %}<rect x='{{ bar.x }}' y='{{ y }}' width='{{ m.bar_w }}' height='{{ h }}'
fill='{{ fill }}'><title>{{ hover }}</title></rect>{% endfor -%}
<text x='{{ bar.x + m.bar_w / 2 }}' y='{{ m.axis_y + 14 }}' font-size='10' text-anchor='middle'{% if bar.slow %}
fill='#b00020' font-weight='bold'{% endif %}>{{ bar.label }}</text>
{%- endfor %}<text x='{{ m.x_title[0] }}' y='{{ m.axis_y + 30 }}' font-size='11'
text-anchor='middle'>{{ m.x_title[1] }}</text>
{%- for x, name, fill in m.legend %}<rect x='{{ x }}' y='{{ m.axis_y + 44 }}' width='12' height='12'
fill='{{ fill }}'/><text x='{{ x + 16 }}' y='{{ m.axis_y + 54 }}' font-size='11'>{{ name }}</text>{% endfor -%}
</svg>
{%- endmacro -%}
"""

PAGE = r"""
{%- from 'views.svg' import heatmap, histogram, rank_bars -%}
{%- macro rows(table) -%}
<tr>{% for c in table.head %}<th>{{ c }}</th>{% endfor %}</tr>
{%- for row in table.rows %}<tr{% if table.css %}
class='{{ table.css }}'{% endif %}>{% for c in row %}<td{% if loop.first and table.left %}
style='text-align:left'{% endif %}>{{ c }}</td>{% endfor %}</tr>{% endfor -%}
{%- endmacro -%}

<!doctype html><html><head><meta charset='utf-8'><title>Aorta benchmark report</title><style>
body{font-family:sans-serif;margin:2em;color:#222;max-width:1400px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f0f0f0}
code{background:#f4f4f4;padding:1px 4px;overflow-wrap:anywhere}
#opening th{text-align:left}#opening td{text-align:left}.wide{overflow-x:auto}
.bad{color:#b00020;font-weight:bold}.ok{color:#1b7f3b}</style></head><body>
<h1>Aorta benchmark report</h1>
<table id='opening'>
{%- for row in opening %}<tr id='{{ row.id }}'><th>{{ row.title }}</th><td{% if row.css %}
class='{{ row.css }}'{% endif %}>{% if row.strong %}<b>{{ row.strong }}</b>{% if row.text %} ·
{% endif %}{% endif %}{{ row.text }}</td></tr>{% endfor -%}
</table>
{%- if files %}
<h2 id='files'>Files beside this report</h2><ul>
{%- for f in files %}<li><a href='{{ f.href }}'>{{ f.name }}</a>: {{ f.what }}{% if f.perfetto %}; to see it, open
<a href='{{ perfetto }}'>{{ perfetto }}</a> → Open trace file → {{ f.name }} (read in your browser, not
uploaded){% endif %}</li>{% endfor -%}
</ul>
{%- endif %}
<h2 id='what-next'>What next</h2><ul>
{%- for w in what_next %}<li>{{ w.text }}{% if w.command %}<br><code>{{ w.command }}</code>{% endif %}</li>
{%- endfor -%}
</ul>{% if what_next | selectattr('command') | list %}<p>In a command, … stands for the other options the run
was given (aorta_path, the image, the overrides).</p>{% endif %}
{%- for w in warnings %}<p class='bad' id='warning'>Warning: {{ w }}</p>{% endfor %}
{%- if no_trace %}<p class='bad' id='no-trace'>{{ no_trace }}</p>{% endif %}
{%- if why %}
<h2>Why it stopped</h2><p class='bad'>{{ why.summary }}</p>
{%- if why.behind.rows %}<table>{{ rows(why.behind) }}</table>{% endif %}
{%- if why.waiting %}<p>Waiting: {{ why.waiting }} (found by {{ why.method }})</p>{% endif %}
{%- if why.errors.rows %}<h3>Kernel log</h3><table>{{ rows(why.errors) }}</table>{% endif %}
{%- if why.evidence %}<p>Evidence: {{ why.evidence | join(', ') }}</p>{% endif %}
{%- endif %}
{%- if baseline %}
<h2>Against the baseline</h2><p
class='{{ baseline.css }}'>{{ baseline.line }}</p><table>{{ rows(baseline.table) }}</table>
{%- endif %}
{%- for note in tool_notes %}<p class='bad'>{{ note }}</p>{% endfor %}
<h2 id='headline'>Headline</h2><table>{{ rows(headline) }}</table><ul>
{%- for title, means in headline_notes %}<li>{{ title }}: {{ means }}</li>{% endfor -%}
</ul>
{%- if checks %}
<h2>Thresholds</h2><ul>{% for c in checks %}<li class='{{ c.css }}'>{{ c.verdict }}:
{{ c.reason }}</li>{% endfor %}</ul>
{%- endif %}
<h2>Stragglers</h2>
{%- if stragglers.rows %}<table id='stragglers'>{{ rows(stragglers) }}</table>
{%- else %}<p class='ok'>{{ rank_verdict }}</p>{% endif %}
{%- if slow_nodes.rows %}<table id='slow-nodes'>{{ rows(slow_nodes) }}</table>
{%- elif node_verdict %}<p class='ok'>Nodes: {{ node_verdict }}</p>{% endif %}
{%- if test_line %}<p>{{ test_line }}</p>{% endif %}
{%- if missing %}<p class='bad'>Missing ranks: {{ missing }}</p>{% endif %}
{%- for e in errors %}<p class='bad'>{{ e }}</p>{% endfor %}
{%- if paired %}<p id='paired'>{{ paired }} rank profile(s) were written twice by Aorta (TensorBoard's
*.pt.trace.json and the Chrome trace of the same window: profiling.tensorboard and chrome_trace both on); each window
is analysed once, from the Chrome trace. Set profiling.tensorboard=false in aorta_training_overrides to halve what is
collected.</p>{% endif %}
{%- if skipped %}<p>Skipped, not profiler traces: {{ skipped }}</p>{% endif %}
{%- if views %}
<h2 id='views'>Every rank</h2>
{%- for v in views %}
<h3>{{ v.what | capitalize }} (ms): a row per node, a cell per GPU</h3><p>Against the median rank: white at it, red
above, blue below, full colour at ±{{ (v.span * 100) | round | int }}%; hover a cell for its node, rank and
value.</p><div class='wide'>{{ heatmap(v.heat) }}</div>
{%- if v.hist %}<p>How many ranks have each value:</p>{{ histogram(v.hist) }}{% endif %}
{%- endfor %}
{%- endif %}
{%- if bars %}<h2 id='rank-bars'>Per-rank time breakdown</h2><p>Each rank's mean step (ms): compute, exposed
communication and the rest (CPU, idle); red labels are named stragglers.</p><div
class='wide'>{{ rank_bars(bars) }}</div>{% endif %}
{%- if top_kernels.rows %}<h2 id='top-kernels'>Top kernels (every
rank)</h2><table>{{ rows(top_kernels) }}</table>{% endif %}
{%- if categories %}<h2 id='kernel-categories'>Kernel time by category (every rank,
ms)</h2><table><tr>{% for c in categories %}<th>{{ c }}</th>{% endfor %}</tr>
<tr>{% for v in categories.values() %}<td>{{ v | fmt }}</td>{% endfor %}</tr></table>{% endif %}
{%- if collectives.rows %}<h2 id='collectives'>Collectives</h2><p>Kernel time of each collective call, by operation,
size and group; algbw = size / mean time, busbw = algbw × nccl-tests' factor (all_reduce 2(n-1)/n, all_gather,
reduce_scatter and all_to_all (n-1)/n, broadcast, reduce and send/recv
1); {% if fabric_note %}{{ fabric_note }} (node to node, measured before the ranks started){% else %}of fabric is
blank: no fabric sweep measured the links{% endif %}.</p><table>{{ rows(collectives) }}</table>{% endif %}
<h2 id='per-rank'>Per rank</h2><p>per_rank.csv's columns: step_time_ms is the rank's mean step (one
ProfilerStep#N); compute_per_step_ms and comm_wait_per_step_ms its computation and exposed communication per step;
total_time_us its whole profiled window (its CVS iteration), in µs.</p>
{%- if per_rank_note %}<p>{{ per_rank_note }}</p>{% endif %}
<div class='wide'><table>{{ rows(per_rank) }}</table></div>
</body></html>
"""
