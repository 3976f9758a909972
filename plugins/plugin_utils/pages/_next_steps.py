# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's "what to do next": a command or a check for each thing the report found, each one
the collection's own (README.md, docs/health.md, docs/results.md).

Private to this collection; controller side.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._stragglers import (
    STRAGGLER_ALPHA,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._opening import (
    PERFETTO,
    fmt,
    percent_change,
    profiled_steps,
    ranges,
    steps_short,
    workload,
)

# per_rank.csv's columns, each (its name, the per-rank row's key it holds). One word, one meaning:


def _next(text: str, command: str = "") -> dict:
    return {"text": text, "command": command}


# The commands below are the collection's own (README.md, docs/health.md, docs/results.md): the
# inventory as -i (the cluster file), or a cluster file as -e aorta_cluster_file (no inventory then);
# "…" stands for the run's other options (aorta_path, the image, the overrides), said on the page.
MULTINODE = "ansible-playbook aorta.cluster.aorta_multinode"


def _next_for_nodes(report: dict, here: str, out_dir: str | None) -> list:
    """What to do about the nodes preflight left out, the slow nodes and the straggler ranks."""
    run = report.get("run") or {}
    items = []
    if run.get("excluded"):
        names = ", ".join(str(e["name"]) for e in run["excluded"][:5]) + (" …" if len(run["excluded"]) > 5 else "")
        healthy = os.path.join(here, "healthy.cluster.json")
        command = f"{MULTINODE} -e aorta_cluster_file={healthy} …"
        if out_dir and not os.path.isfile(healthy):
            command = ""
        items.append(
            _next(
                f"Preflight left out {len(run['excluded'])} node(s): {names} (why: run.json's excluded). Fix them"
                " before measuring on every node; healthy.cluster.json is the cluster file without them, to run"
                " on the others alone:",
                command,
            )
        )
    for node in report["slow_nodes"][:3]:
        items.append(
            _next(
                f"Slow node {node['node']} (ranks {ranges(node['ranks'])}, +{node['excess_ratio'] * 100:.0f}% compute"
                " per step): check its health and fingerprint (run.json's nodes[]); to measure without it, copy"
                " your cluster file without its node_dict entry and run on the copy:",
                f"{MULTINODE} -e aorta_cluster_file=<the copy> …",
            )
        )
    timeline = not out_dir or os.path.isfile(os.path.join(out_dir, "timeline.json"))
    files = {r.get("rank"): r.get("file") for r in report.get("per_rank_summary") or []}
    for s in report["stragglers"][:3]:
        where = (
            f"open {PERFETTO} → Open trace file → timeline.json, process 'rank {s['rank']} · {s['node']}'"
            if timeline
            else f"its trace is {files.get(s['rank'])}"
        )
        items.append(
            _next(
                f"Straggler rank {s['rank']} on {s['node']} (+{s['excess_ratio'] * 100:.0f}% compute per step): see"
                f" what its steps spend longer on than its peers': {where}."
            )
        )
    return items


def _next_for_links(report: dict) -> list:
    """What to do about a slow link the fabric sweep named: where to look, and how to keep such a
    node out of a run before its ranks start."""
    links = report.get("slow_links") or []
    if not links:
        return []
    names = ", ".join(str(link.get("node")) for link in links[:5]) + (" …" if len(links) > 5 else "")
    return [
        _next(
            f"Slow fabric link on {names} (the sweep before the ranks started): check that node's fabric interface"
            " (its speed and MTU in run.json's nodes[].fingerprint and drift, its error counters in nodes[].link),"
            " cable and switch port. To stop a run before its ranks start on a node below a rate (it then goes into"
            " unhealthy.txt, and healthy.cluster.json leaves it out):",
            f"{MULTINODE} -i <your inventory> -e aorta_fabric_min_gbps=<Gbit/s> …",
        )
    ]


def _next_for_figures(report: dict, run: dict) -> list:
    """What to do about a regression against the baseline, thresholds not met with no one to blame,
    or too few profiled steps to name anyone."""
    items = []
    base = report.get("baseline") or {}
    if base.get("verdict") == "regression":
        change = percent_change(((base.get("metrics") or {}).get("avg_step_time_ms") or {}).get("delta_ratio"))
        differs = base.get("differences") or []
        items.append(
            _next(
                f"Step time {change or 'longer'} against the baseline {base.get('source')}: compare the two runs'"
                " run.json (context, nodes[].fingerprint)"
                + (f"; they differ in: {'; '.join(differs)}" if differs else "")
                + ". The next run against the same baseline:",
                f"{MULTINODE} -i <your inventory> -e aorta_baseline={base.get('source')} …",
            )
        )
    named = report["slow_nodes"] or report["stragglers"]
    failed = [c for c in report["validation"]["checks"] if not c["passed"]]
    if failed:
        text = f"Threshold(s) not met ({', '.join(c['name'] for c in failed)})"
        command = ""
        if not named and not items:
            text += " and no node or rank stands out: the cluster as a whole is below aorta_expected_results"
            command = f"{MULTINODE} -i <your inventory> -e aorta_baseline=auto …"
        text += "."
        perf = report["performance"]
        if any(c["name"] == "max_avg_iteration_ms" for c in failed) and perf.get("avg_step_time_ms") is not None:
            steps = profiled_steps(report)
            text += (
                " max_avg_iteration_ms judges the CVS iteration, each rank's whole profiled window"
                f"{f' of {steps} steps' if steps else ''} ({fmt(perf.get('avg_iteration_time_ms'))} ms), not one"
                f" step ({fmt(perf['avg_step_time_ms'])} ms)."
            )
        items.append(_next(text + (" Compare with the last comparable run:" if command else ""), command))
    need = None if named else steps_short(report)
    if need:
        overrides = dict(run.get("overrides") or {}) if isinstance(run.get("overrides"), dict) else {}
        overrides["profiling.active"] = need
        extra = json.dumps({"aorta_training_overrides": overrides})
        items.append(
            _next(
                f"{(report.get('straggler_test') or {}).get('steps')} profiled steps are too few to name a slow node"
                f" or rank at {STRAGGLER_ALPHA:.0%} significance: profile at least {need} (training.max_steps must"
                " cover profiling.wait + warmup + active):",
                f"{MULTINODE} -i <your inventory> -e '{extra}' …",
            )
        )
    return items


def what_next(report: dict, out_dir: str | None = None) -> list:
    """What to do about this run, finding by finding, each with the command to run when there is
    one ({'text', 'command'}); a healthy run has nothing to do."""
    run = report.get("run") or {}
    here = os.path.abspath(out_dir) if out_dir else "<results dir>"
    items = []
    status = run.get("status")
    if run.get("record") and status not in (None, "COMPLETED"):
        why = "'Why it stopped' below and " if report.get("diagnosis") else ""
        items.append(_next(f"The run ended {status}: read {why}each node's log (logs/<node>.log)."))
    items += _next_for_nodes(report, here, out_dir)
    items += _next_for_links(report)
    items += _next_for_figures(report, run)
    if not items:
        verdict = (report.get("verdict") or {}).get("verdict")
        items.append(
            _next("Nothing to do: the run passed and no node or rank stands out.")
            if verdict in (None, "PASS")
            else _next(f"The verdict is {verdict}: its reasons are in the first row.")
        )
    _what, standin = workload(report)
    if standin:
        items.append(
            _next(
                "This was the stand-in: for GPU figures, run Aorta itself on GPU nodes (docs/quickstart.md):",
                f"{MULTINODE} -i <your inventory> -e aorta_path=<Aorta checkout on every node>"
                " -e aorta_docker_image=<Aorta's image>",
            )
        )
    return items
