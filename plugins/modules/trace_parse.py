#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: trace_parse
short_description: Analyse a directory of PyTorch profiler traces into a CVS-compatible report
version_added: 0.1.0
description:
  - Reads every C(.json) and C(.json.gz) trace under O(traces_dir) (a C(combined_traces) tree with
    or without its manifest, or a plain folder), one process per file in a bounded pool, and writes
    C(aorta_benchmark_report.json), C(per_rank.csv) and a self-contained C(report.html) with plots
    into O(report_dir).
  - Ranks come from each trace's C(distributedInfo), never from file names; nodes from the
    manifest's inventory names, else the C(node_<n>) directory.
  - GPU traces get TraceLens' C(gpu_timeline) (same definitions and figures), kernel time by
    category and per-collective statistics; every trace, CPU-only (gloo) included, gets iteration
    times from C(ProfilerStep#N), communication time and the compute/communication overlap.
  - Stragglers are ranks whose compute per iteration exceeds the median by more than
    O(straggler_threshold) (in synchronous training every rank shows the same iteration time);
    a node whose ranks are all stragglers is slow as a whole.
  - A malformed, truncated, empty, non-UTF-8 or otherwise unreadable trace is one error line in
    the report naming the file; the others are still analysed.
  - CVS's C(expected_results) thresholds give pass or fail with the reason; with
    O(fail_on_threshold) a failed threshold fails the task.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  traces_dir:
    description: Directory of traces (not read when O(summaries) is given).
    type: path
    required: true
  summaries:
    description:
      - Per-file summaries made on the nodes by M(aorta.cluster.trace_summary), each with an added
        C(node) (inventory name); the report is then built from them and no trace is read here.
    type: list
    elements: dict
  report_dir:
    description: Where the report files go.
    type: path
    required: true
  include_unlinked_kernels:
    description:
      - Count every GPU event, like TraceLens' C(--include_unlinked_kernels).
      - The default counts only the events a launch links to, like TraceLens' default.
    type: bool
    default: false
  expected_results:
    description:
      - CVS thresholds C(max_avg_iteration_ms), C(min_compute_ratio), C(min_overlap_ratio),
        C(max_time_variance_ratio); unknown keys are an error.
    type: dict
    default: {}
  fail_on_threshold:
    description: Fail the task when a threshold is not met.
    type: bool
    default: false
  gpus_per_node:
    description: GPUs per node for the report's C(cluster) block; default ranks per node found.
    type: int
  expected_ranks:
    description:
      - World size the run had; ranks below it with no trace are listed as missing.
      - Default the traces' own C(world_size).
    type: int
  configuration:
    description: Recorded as the report's C(configuration) block (for example C(nccl_channels), C(rccl_branch)).
    type: dict
    default: {}
  straggler_threshold:
    description: Relative excess of compute per iteration over the median that marks a straggler.
    type: float
    default: 0.1
  max_workers:
    description: Processes analysing files at once; default the number of CPUs.
    type: int
  duration_seconds:
    description: The run's duration, recorded in the report.
    type: float
  diagnosis:
    description:
      - Why the run stopped, from M(aorta.cluster.run_diagnosis); recorded in the report and shown
        first in report.html, as "Why it stopped", with the ranks behind, their frames and the
        nodes' kernel-log trouble.
    type: dict
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Analyses and returns the report but writes no file.
  diff_mode:
    support: none
requirements:
  - msgspec (optional, faster decoding)
  - matplotlib (optional, for the plots in report.html)
"""

EXAMPLES = r"""
- name: Report on a run's combined traces
  aorta.cluster.trace_parse:
    traces_dir: "{{ aorta_results_dir_resolved }}/combined_traces"
    report_dir: "{{ aorta_results_dir_resolved }}"
    expected_results:
      max_avg_iteration_ms: 12000
      min_compute_ratio: 0.01
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
report:
  description: Path of C(aorta_benchmark_report.json).
  returned: success and not check mode
  type: str
html:
  description: Path of C(report.html).
  returned: success and not check mode
  type: str
csv:
  description: Path of C(per_rank.csv).
  returned: success and not check mode
  type: str
status:
  description: V(completed) (every rank analysed), V(partial) (some missing or unreadable), V(failed) (none).
  returned: always
  type: str
performance:
  description: The report's headline C(performance) block.
  returned: always
  type: dict
stragglers:
  description: Suspected straggler ranks, worst first, each with C(rank) and C(node).
  returned: always
  type: list
  elements: dict
validation:
  description: Threshold checks and whether all passed.
  returned: always
  type: dict
missing_ranks:
  description: Ranks with no trace.
  returned: always
  type: list
  elements: int
errors:
  description: Files that could not be analysed, each with the reason.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils._report import ReportError, build_report, write_outputs


def main():
    module = AnsibleModule(
        argument_spec={
            "traces_dir": {"type": "path", "required": True},
            "summaries": {"type": "list", "elements": "dict"},
            "report_dir": {"type": "path", "required": True},
            "include_unlinked_kernels": {"type": "bool", "default": False},
            "expected_results": {"type": "dict", "default": {}},
            "fail_on_threshold": {"type": "bool", "default": False},
            "gpus_per_node": {"type": "int"},
            "expected_ranks": {"type": "int"},
            "configuration": {"type": "dict", "default": {}},
            "straggler_threshold": {"type": "float", "default": 0.1},
            "max_workers": {"type": "int"},
            "duration_seconds": {"type": "float"},
            "diagnosis": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    p = module.params
    expected = {k: v for k, v in (p["expected_results"] or {}).items() if v is not None}
    try:
        report = build_report(
            p["traces_dir"],
            include_unlinked_kernels=p["include_unlinked_kernels"],
            expected_results=expected,
            gpus_per_node=p["gpus_per_node"],
            configuration=p["configuration"],
            max_workers=p["max_workers"],
            straggler_threshold=p["straggler_threshold"],
            expected_ranks=p["expected_ranks"],
            duration_seconds=p["duration_seconds"],
            summaries=p["summaries"],
        )
        if p["diagnosis"]:
            report["diagnosis"] = p["diagnosis"]
    except ReportError as exc:
        module.fail_json(msg=str(exc))
    result = {
        "changed": not module.check_mode,
        "status": report["status"],
        "performance": report["performance"],
        "stragglers": report["stragglers"],
        "slow_nodes": report["slow_nodes"],
        "validation": report["validation"],
        "missing_ranks": report["missing_ranks"],
        "errors": report["errors"],
    }
    if not module.check_mode:
        try:
            result.update(write_outputs(report, p["report_dir"]))
        except OSError as exc:
            module.fail_json(msg=f"cannot write the report into {p['report_dir']}: {exc.strerror}", **result)
    if p["fail_on_threshold"] and not report["validation"]["passed"]:
        failed = [c["reason"] for c in report["validation"]["checks"] if not c["passed"]]
        module.fail_json(msg="thresholds not met: " + "; ".join(failed), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
