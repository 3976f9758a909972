# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""trace_parse in the controller's own Python (documented in plugins/modules/trace_parse.py).

Run as a module it would use the hosts' ansible_python_interpreter, which a cluster file's vars
often set for every host, implicit localhost included: a Python without msgspec (the slow
decoder), or without the Jinja2 that draws report.html. Here it runs where ansible-playbook runs.

What the task leaves out and the run's nodes know (their summaries, clock offsets, ranks per node)
is read here from their registered results, once each (plugin_utils/results/_node_results.py), instead of
Jinja loops over every node's hostvars in the role.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import kinds_of
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.report._task import TASK_ARGUMENT_SPEC, run_task
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _judging, _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import ControllerTask

# Where the play has none of them (a task outside the collection's plays): the variables' defaults.
# One name each (Ansible's documentation reader cannot read a tuple assignment at module level).
SAMPLE_NODES = DEFAULTS["aorta_collect_sample_nodes"]
BUDGET_GB = DEFAULTS["aorta_collect_budget_gb"]


def _number(value: Any) -> str:
    """A headline figure, 0 when unknown, to 3 decimals (what Jinja's ``round(3)`` printed)."""
    return str(round(value or 0, 3))


def headline_lines(result: Mapping[str, Any]) -> list[str]:
    """The report's headline as the role prints it: the step and iteration times and ratios, then a
    line per slow node, straggler rank, failed threshold, warning and error, the baseline's verdict,
    and where report.html is (``(check mode)`` when none was written)."""
    perf = result.get("performance") or {}
    lines = [
        f"report {result.get('status')}: avg step {_number(perf.get('avg_step_time_ms'))} ms (profiled window, "
        f"CVS iteration {_number(perf.get('avg_iteration_time_ms'))} ms), compute ratio "
        f"{_number(perf.get('avg_compute_ratio'))}, overlap {_number(perf.get('avg_overlap_ratio'))}"
    ]
    lines += [f"slow node {node.get('node')}" for node in result.get("slow_nodes") or []]
    lines += [f"straggler rank {rank.get('rank')}" for rank in result.get("stragglers") or []]
    checks = (result.get("validation") or {}).get("checks") or []
    lines += [f"FAIL {check.get('reason')}" for check in checks if not check.get("passed")]
    lines += [f"WARNING {warning}" for warning in result.get("report_warnings") or []]
    lines += [error.get("error") for error in result.get("errors") or []]
    baseline = result.get("baseline")
    if baseline:
        reason = f" - {baseline.get('reason')}" if baseline.get("reason") else ""
        lines.append(f"baseline: {baseline.get('verdict')}{reason}")
    return [*lines, f"report: {result.get('html', '(check mode)')}"]


def awx_stats(result: Mapping[str, Any]) -> dict[str, Any]:
    """set_stats' data for the report (once for the run, not per host); none in check mode."""
    if "report" not in result:
        return {}
    perf = result.get("performance") or {}
    data = {
        "aorta_report_status": result.get("status"),
        "aorta_report": result.get("report", ""),
        "aorta_report_html": result.get("html", ""),
        **{f"aorta_{key}": perf.get(key) for key in STATS_FIGURES},
        "aorta_straggler_ranks": [rank.get("rank") for rank in result.get("stragglers") or []],
        "aorta_slow_nodes": [node.get("node") for node in result.get("slow_nodes") or []],
        "aorta_thresholds_passed": (result.get("validation") or {}).get("passed"),
        "aorta_baseline_verdict": (result.get("baseline") or {}).get("verdict"),
    }
    return {"data": data, "per_host": False, "aggregate": True}


STATS_FIGURES = (
    "avg_iteration_time_ms",
    "avg_step_time_ms",
    "avg_compute_ratio",
    "avg_comm_ratio",
    "avg_overlap_ratio",
)


class ActionModule(ControllerTask):
    """The report made here (plugin_utils/report/_task.py's ``run_task``), from the traces or the
    nodes' summaries, judged and compared with its baseline."""

    ARGUMENT_SPEC: ClassVar[dict[str, Any]] = TASK_ARGUMENT_SPEC
    TASK: Callable[[dict[str, Any], bool], Any] = staticmethod(run_task)
    NODE_VARS: tuple[str, ...] = ("aorta_launch", "aorta_end", "aorta_prepare")

    def from_nodes(
        self, task_vars: Mapping[str, Any], nodes: Mapping[str, Any], groups: Mapping[str, Any], given: Collection[str]
    ) -> dict[str, Any]:
        """The options the task did not give, from the nodes (none on a folder of traces given alone):
        the summaries the nodes made of their own traces (aorta_collect_traces sample or none: no trace
        is then read here) and how each node's analysis went; each
        node's clock offset; the ranks per node the launch used, else aorta_gpus_per_node."""
        found = self.where(task_vars)
        made = _node_results.summaries(nodes, groups) if "summaries" not in given else None
        if made is not None:
            found["summaries"], found["node_analysis"] = made
            found["collection"] = self.collection(task_vars, nodes, groups)
        if "clock_offsets" not in given:
            found["clock_offsets"] = _node_results.clock_offsets(nodes, groups)
        if "gpus_per_node" not in given:
            gpus = self._variable(task_vars, "aorta_gpus_per_node")
            found["gpus_per_node"] = _node_results.nproc(nodes, groups, gpus_per_node=gpus)
        return found

    def collection(
        self, task_vars: Mapping[str, Any], nodes: Mapping[str, Any], groups: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What the report says of the run's collection when the nodes analysed their own traces: the
        mode the nodes' ends used and why, and for ``sample`` the pull that follows the report (its
        seed, from the run id, the sample's size and the budget)."""
        said = _node_results.collect_mode(nodes, groups)
        run_id = str(self._variable(task_vars, "aorta_run_id_resolved", "") or "")
        return {
            "mode": said.get("mode"),
            "why": said.get("why"),
            "seed": _collect_plan.seed_of(run_id),
            "sample_nodes": int(self._variable(task_vars, "aorta_collect_sample_nodes", SAMPLE_NODES) or 0),
            "budget_gb": float(self._variable(task_vars, "aorta_collect_budget_gb", BUDGET_GB) or 0),
        }

    def judging(
        self, task_vars: Mapping[str, Any], args: Mapping[str, Any], groups: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What the report is judged by: the thresholds merged over CVS's defaults key by key (one key
        given changes one threshold); the baseline ``auto`` resolved in the results root (the run's
        history) with why it was chosen, and a named baseline's fingerprint differences. After a run, a
        threshold not met does not fail this task: run_outcome, the run's last task, judges the run and
        fails the play after run.json, junit.xml and the history are written."""
        found: dict[str, Any] = {"expected_results": _judging.thresholds(args.get("expected_results"))}
        run_dir = str(self._variable(task_vars, "aorta_results_dir_resolved", "") or "")
        after_run = bool(run_dir) and not self._task.args.get("traces_dir") and bool(_node_results.nodes_of(groups))
        if after_run:
            found["fail_on_threshold"] = False
        found["fail_on_verdict"] = not after_run
        given = self._task.args.get("verdict_ignores")
        if given is None:
            given = self._variable(task_vars, "aorta_verdict_ignores", DEFAULTS["aorta_verdict_ignores"])
        found["verdict_ignores"] = kinds_of(given)  # ValueError: the task fails naming the kind
        default_ignore = DEFAULTS["aorta_baseline_ignore"]
        ignore = [str(key) for key in self._variable(task_vars, "aorta_baseline_ignore", default_ignore) or []]
        if not run_dir:  # trace_report.yml: the run whose traces these are, if any
            run_dir = _judging.run_dir_of(str(args.get("report_dir") or ""), str(args.get("traces_dir") or ""))
        found.update(_judging.baseline(args.get("baseline"), run_dir, ignore))
        return found

    def where(self, task_vars: Mapping[str, Any]) -> dict[str, Any]:
        """The traces and the report's folder when the task leaves them empty: after a run, its
        combined_traces and its results directory; a folder of traces alone gets its report beside."""
        run_dir = str(self._variable(task_vars, "aorta_results_dir_resolved", "") or "")
        traces = str(self._task.args.get("traces_dir") or "") or (f"{run_dir}/combined_traces" if run_dir else "")
        return {"traces_dir": traces, "report_dir": str(self._task.args.get("report_dir") or "") or run_dir or traces}

    def finish(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """What the result gains once the task succeeded: the headline the role prints, and the
        headline figures AWX shows on the job and passes to a workflow's next node."""
        return {"headline_lines": headline_lines(result), "ansible_stats": awx_stats(result)}
