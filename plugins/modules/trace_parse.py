#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, in the controller's own Python (the
# report's code and its pages are controller-only: plugin_utils/report and plugin_utils/pages); this
# file holds its documentation, as ansible.builtin.debug's does.

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
  - "The report's C(verdict) (the same function as M(aorta.cluster.run_outcome)'s) fails on the run's
    status, each threshold not met and each finding (slow node, straggler, slow link, drift, link
    errors, a regression against the baseline) not listed in O(verdict_ignores)."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  traces_dir:
    description:
      - Directory of traces (not read when O(summaries) is given).
      - Empty (the action) means the run's C(combined_traces), under C(aorta_results_dir_resolved).
    type: path
    required: true
  summaries:
    description:
      - Per-file summaries made on the nodes by M(aorta.cluster.trace_summary), each with an added
        C(node) (inventory name); the report is then built from them and no trace is read here.
      - "Left out after a run whose nodes analysed their own traces (C(aorta_collect_traces) V(sample)
        or V(none)): read from the summary file each node's M(aorta.cluster.node_end) fetched
        (C(aorta_end.summary.path)), in node order."
    type: list
    elements: dict
  node_analysis:
    description:
      - How each node's own analysis went, a row per node (C(node), C(rank), C(decoder), C(analysis_s),
        C(traces), C(bytes), C(peak_rss_mb)); the report shows the times and names the nodes that had no msgspec.
      - Left out after such a run, read from the same summary files.
    type: list
    elements: dict
  collection:
    description:
      - How the run's traces were collected when its nodes analysed their own - C(mode) and C(why) (as
        the nodes' ends resolved C(aorta_collect_traces)), and for V(sample) the pull after the report
        (C(seed), from the run id; C(sample_nodes); C(budget_gb)); the report states it (C(collection)).
      - Left out after such a run, from the nodes' results and the play's variables.
    type: dict
  report_dir:
    description:
      - Where the report files go.
      - Empty (the action) means the run's results directory (C(aorta_results_dir_resolved)), else O(traces_dir).
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
      - Merged over the defaults of C(aorta_expected_results) key by key by the action (one key given
        changes one threshold); a key given as null or empty turns that check off.
    type: dict
    default: {}
  fail_on_threshold:
    description:
      - Fail the task when a threshold is not met.
      - "After a run (O(traces_dir) left empty, the run's nodes known), the task never fails on a
        threshold: M(aorta.cluster.run_outcome), the run's last task, judges the run and fails the play
        after run.json, junit.xml and the history are written."
    type: bool
    default: false
  fail_on_verdict:
    description:
      - Fail the task when the verdict fails by the exit rule (the run's status, a finding not in
        O(verdict_ignores), a threshold not met with O(fail_on_threshold)).
      - "The action sets it: true for a folder of traces given alone (C(trace_report.yml)), false
        after a run, where M(aorta.cluster.run_outcome) fails the play once everything is written."
    type: bool
    default: false
  verdict_ignores:
    description:
      - Finding kinds that do not fail the verdict (kept as notes), from C(aorta_verdict_ignores) when
        left out; any of V(slow_node), V(straggler), V(slow_link), V(drift), V(link_errors),
        V(baseline_regression).
    type: list
    elements: str
    default: []
  gpus_per_node:
    description:
      - GPUs per node for the report's C(cluster) block.
      - "Left out: the ranks per node the run's launch used (the head's C(aorta_launch.nproc)), else
        C(aorta_gpus_per_node), else the ranks per node found."
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
    description: The run's duration, recorded in the report; without it, the duration in O(run_json).
    type: float
  run_json:
    description:
      - The run's C(run.json), whose status, id, times and context (image, config, overrides, nodes,
        GPUs, batch size, sequence length) open the report and give its throughput.
      - Empty means C(run.json) beside O(traces_dir) (a run's C(combined_traces)) when there is one; a bare
        folder of traces is reported with "no run record".
    type: path
  clock_offsets:
    description:
      - Per node (its inventory name), its clock minus the controller's in seconds (preflight
        measures it); the merged C(timeline.json) moves each node's events by minus its offset.
      - "Left out: each node of C(aorta_nodes) whose M(aorta.cluster.node_prepare) result
        (C(aorta_prepare.derived.record.clock_offset_s)) has one; none without the group (a folder
        of traces given alone)."
    type: dict
    default: {}
  baseline:
    description:
      - An earlier results directory, or its C(aorta_benchmark_report.json), to compare with; or
        V(auto), which the action resolves to the newest COMPLETED run that found nothing, with
        the same fingerprint in the results root (the parent of the run's results directory).
      - The mean step time (C(avg_step_time_ms)) is judged C(regression) or C(improvement) when it
        changed by more than O(baseline_tolerance) and by more than twice the noise of the two means
        (the steps' spread), C(within noise) when only the first holds, else C(same); the ratios are
        shown, not judged.
    type: path
  baseline_tolerance:
    description: Relative change within which the run is the same as the baseline.
    type: float
    default: 0.05
  baseline_context:
    description:
      - "Set by the action: why the baseline was chosen (C(chosen)), why none could be (C(reason); the
        report's baseline then says C(not compared)), and a named baseline's fingerprint
        C(differences), shown beside its verdict."
    type: dict
  diagnosis:
    description:
      - Why the run stopped, from M(aorta.cluster.run_record) or M(aorta.cluster.run_diagnosis); recorded
        in the report and shown first in report.html, as "Why it stopped", with the ranks behind, their
        frames and the nodes' kernel-log trouble.
    type: dict
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: Analyses and returns the report but writes no file.
  diff_mode:
    support: none
  action:
    description:
      - An action plugin of the same name runs the analysis in the controller's own Python, whatever
        the hosts' C(ansible_python_interpreter); the result's C(tools) and report.html say when
        the fast decoder (msgspec) is missing there. report.html is drawn by Jinja2 (inline SVG, no
        plotting library).
    support: full
requirements:
  - msgspec (optional, faster decoding)
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
run:
  description:
    - The run the traces came from (its run.json), or C(record=null) and a C(note) for a bare folder of
      traces; C(status) is the run's own (COMPLETED, FAILED, TIMEOUT), not the analysis'.
    - C(run_id), C(started_epoch), C(finished_epoch), C(duration_seconds), C(image), C(image_id),
      C(base_config), C(overrides), C(launch_mode), C(nodes), C(gpus_per_node), C(batch_size),
      C(sequence_length), C(data_parallel_ranks), C(samples_per_second) (batch size x data-parallel
      ranks / mean step time), C(tokens_per_second) (x sequence length), C(note).
  returned: when a report was built
  type: dict
performance:
  description: The report's headline C(performance) block.
  returned: always
  type: dict
stragglers:
  description: Suspected straggler ranks, worst first, each with C(rank) and C(node), slower than the median
    rank and than their own node's other ranks, with the test's evidence.
  returned: always
  type: list
  elements: dict
slow_nodes:
  description: Nodes slow as a whole (all their ranks compute longer, so no rank of theirs stands out), most
    certain first, each with C(node), C(ranks), C(excess_ratio), the test's counts and p-values, and
    C(per_step) (the node's median compute against the median node's).
  returned: always
  type: list
  elements: dict
validation:
  description: Threshold checks and whether all passed; a check that cannot be judged (the variance ratio
    over a zero average, which CVS skips too) has C(skipped=true).
  returned: always
  type: dict
missing_ranks:
  description: Ranks with no trace.
  returned: always
  type: list
  elements: int
errors:
  description: Files that could not be analysed, each with the reason; with no trace at all after a run,
    the line saying so. On a folder without any trace (and no run's diagnosis) the task fails with that
    line instead of writing a report of zeros.
  returned: always
  type: list
  elements: dict
report_warnings:
  description: What makes the report doubtful though it was written (the report's C(warnings)), such as
    traces of more than one run (two world sizes, each named with its count of traces).
  returned: when a report was built
  type: list
  elements: str
skipped_files:
  description: JSON files that hold no profiler trace (no C(traceEvents), or none in it), each with
    C(file) and C(reason); never taken for a rank.
  returned: always
  type: list
  elements: dict
timeline:
  description:
    - The merged timeline of every rank, C(timeline.json) (Chrome trace / Perfetto JSON); each rank
      a process C(rank <g> · <node>); every profiler step and collective and the longest GPU events
      (CPU ranges on CPU-only traces) up to a tenth of each trace's events; C(otherData) says how.
  returned: success, not in check mode
  type: str
baseline:
  description:
    - C(source), C(tolerance), C(noise_ms), C(metrics) (each C(now), C(then), C(delta_ratio),
      C(judged)), C(verdict), C(reason), C(chosen) (why this run, with V(auto)) and C(differences)
      (a named baseline's fingerprint against this run's); with a C(regression), C(stands_out), who
      stands out in this run (the slow nodes, else the slow ranks with their nodes), or why nobody is
      named.
    - "With V(auto) and no comparable run: C(verdict) V(not compared) and C(reason) saying why."
  returned: with O(baseline)
  type: dict
verdict:
  description:
    - "The run's one verdict, as C(run.json) and the console's last line say it: C(verdict) (V(PASS)
      when the run COMPLETED, every judged threshold holds and nothing was found, else V(FAIL)),
      C(reasons) (one line per cause), C(notes) (what was judged, each finding kind ignored),
      C(findings) (the finding kinds that failed it) and C(ignored) (those kept as notes)."
  returned: success
  type: dict
ansible_stats:
  description:
    - "The report's headline figures for AWX (as M(ansible.builtin.set_stats) gives them, once for the
      run): C(aorta_report_status), C(aorta_report), C(aorta_report_html), C(aorta_avg_iteration_time_ms),
      C(aorta_avg_step_time_ms), C(aorta_avg_compute_ratio), C(aorta_avg_comm_ratio),
      C(aorta_avg_overlap_ratio), C(aorta_straggler_ranks), C(aorta_slow_nodes),
      C(aorta_thresholds_passed), C(aorta_baseline_verdict)."
  returned: success and not check mode
  type: dict
headline_lines:
  description:
    - "The report's headline as the role C(aorta.cluster.trace_parse) prints it: C(report <status>: avg step ...),
      a line per slow node, straggler rank, failed threshold, warning and error, the baseline's verdict
      and C(report: <report.html>) (C(report: (check mode)) when none was written)."
  returned: success
  type: list
  elements: str
tools:
  description:
    - The Python that analysed (C(python)), whether it had C(plots) and the C(fast_decoder), and
      C(notes) saying what is missing.
  returned: success
  type: dict
"""
