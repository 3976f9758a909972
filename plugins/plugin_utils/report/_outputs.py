# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's files: aorta_benchmark_report.json, timeline.json, per_rank.csv and report.html.

Private to this collection; controller side. Written atomically, report.html last (it links the
others).
"""

from __future__ import annotations

import csv
import io
import json
import os

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import TIMELINE_ROWS
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._report_page import (
    CSV_COLUMNS,
    CSV_FIELDS,
    cell,
    render_html,
)


def write_outputs(report: dict, out_dir: str) -> dict:
    """aorta_benchmark_report.json, timeline.json, per_rank.csv and report.html."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "report": os.path.join(out_dir, "aorta_benchmark_report.json"),
        "csv": os.path.join(out_dir, "per_rank.csv"),
        "html": os.path.join(out_dir, "report.html"),
    }
    timeline = report.get("_timeline")
    report = {k: v for k, v in report.items() if k != "_timeline"}
    if timeline is not None:
        paths["timeline"] = os.path.join(out_dir, "timeline.json")
        write_text_atomic(paths["timeline"], json.dumps(timeline, separators=(",", ":")) + "\n")
    write_text_atomic(paths["report"], json.dumps(report, indent=2, sort_keys=False) + "\n")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CSV_COLUMNS, *(f"gpu_{row}_ms" for row in TIMELINE_ROWS)])
    # A trace without rank information (a single process of several) is a row too, rank empty.
    for r in [*report["per_rank_summary"], *(report.get("unranked_traces") or [])]:
        writer.writerow([cell(r, key) for _name, key in CSV_FIELDS] + [r["gpu_timeline"][row] for row in TIMELINE_ROWS])
    write_text_atomic(paths["csv"], buffer.getvalue())
    # Last: the page links the files written above, and those of the run beside it.
    write_text_atomic(paths["html"], render_html(report, out_dir))
    return paths
