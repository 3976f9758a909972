# SPDX-License-Identifier: GPL-3.0-or-later
"""trace_parse runs in the controller's own Python, whatever the hosts' interpreter says: with
ansible_python_interpreter pointing at a Python without msgspec, the report is decoded fast."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.action.trace_parse import ActionModule, headline_lines
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _node_summary
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan


def test_the_report_is_made_by_the_controllers_python_with_its_fast_decoder(play, tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 90, 50], bad_file=False)
    bare = shutil.which("python3", path="/usr/bin")  # the system Python: no msgspec
    task = {"traces_dir": str(root), "report_dir": str(tmp_path / "out")}
    _rc, out = play({"aorta.cluster.trace_parse": task}, {"ansible_python_interpreter": bare})
    # The slow rank is a finding: on a folder of traces the task fails naming it, after the report
    # is written (aorta_verdict_ignores would keep it a note).
    assert out["failed"] and out["msg"].startswith("found: straggler: rank 2 on node "), out["msg"]
    assert out["verdict"]["verdict"] == "FAIL" and out["verdict"]["findings"] == ["straggler"]
    # ansible-playbook's own Python (this venv's), not the interpreter the hosts were given.
    assert Path(out["tools"]["python"]).parent == Path(sys.executable).parent != Path(bare).parent
    assert out["tools"]["fast_decoder"] is True and out["tools"]["notes"] == []
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("<svg") == 5 and "id='rank-bars'" in html
    assert json.loads((tmp_path / "out" / "aorta_benchmark_report.json").read_text())["status"] == "completed"


def test_a_run_against_itself_as_baseline_is_the_same(play, tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)
    first = {"traces_dir": str(root), "report_dir": str(tmp_path / "then")}
    _rc, out = play({"aorta.cluster.trace_parse": first})
    assert not out.get("failed"), out
    again = dict(first, report_dir=str(tmp_path / "now"), baseline=str(tmp_path / "then"))
    _rc, out = play({"aorta.cluster.trace_parse": again})
    assert out["baseline"]["verdict"] == "same" and out["baseline"]["source"].endswith("aorta_benchmark_report.json")
    _rc, bad = play({"aorta.cluster.trace_parse": dict(again, baseline=str(tmp_path / "nowhere"))})
    assert bad["failed"] and bad["msg"].startswith("aorta_baseline: ")


def action(args, check_mode=False, capture=None):
    """The action in-process; with ``capture`` (a dict), the task's arguments land there instead of
    the analysis running."""
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, action="aorta.cluster.trace_parse")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    module = ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)
    if capture is not None:
        module.TASK = lambda found, _check: (capture.update(found) or {"status": "completed", "performance": {}}, "")
    return module


def summary_file(tmp_path) -> str:
    """Node a's summary file as its end fetched it (trace_summary's format)."""
    path = tmp_path / "node_summaries" / "node_0.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "format": _node_summary.FORMAT,
        "figures": {"decoder": "json", "analysis_s": 1.5, "traces": 1, "bytes": 10, "peak_rss_mb": 30.0},
        "summaries": [{"file": "r0.json", "rank": 0}],
        "files": [],
    }
    with gzip.open(path, "wt") as handle:
        json.dump(body, handle)
    return str(path)


def run_vars(summary=None, head="a"):
    """Two nodes after a run: with ``summary``, a's summary file (aorta_collect_traces sample or none);
    both clock offsets; with head b, node a was excluded."""
    hostvars = {
        "a": {
            "aorta_launch": {"head": head, "nproc": 4} if head == "a" else {"head": head, "excluded": True},
            "aorta_prepare": {"derived": {"record": {"clock_offset_s": -0.5}}},
            "aorta_end": {"summary": {"path": summary}} if summary else {},
        },
        "b": {
            "aorta_launch": {"nproc": 2},
            "aorta_prepare": {"derived": {"record": {"clock_offset_s": 1.25}}},
            "aorta_end": {},
        },
    }
    return {"groups": {"aorta_nodes": ["a", "b"]}, "hostvars": hostvars, "aorta_gpus_per_node": 8}


def test_what_the_task_leaves_out_comes_from_the_nodes(tmp_path):
    found: dict = {}
    out = action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars=run_vars())
    assert not out.get("failed") and out["headline_lines"][0].startswith("report completed: avg step 0 ms")
    assert found["clock_offsets"] == {"a": -0.5, "b": 1.25} and found["gpus_per_node"] == 4
    assert found.get("summaries") is None  # no node made a summary: the traces are read
    summary = summary_file(tmp_path)
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars=run_vars(summary))
    assert found["summaries"] == [{"file": "r0.json", "rank": 0, "node": "a"}]
    # The mode the nodes' ends resolved (none said here), and the pull's seed from the run id.
    assert found["collection"] == {
        "mode": None,
        "why": None,
        "seed": _collect_plan.seed_of(""),
        "sample_nodes": 2,
        "budget_gb": 50.0,
    }
    assert found["node_analysis"] == [
        {"node": "a", "rank": 0, "decoder": "json", "analysis_s": 1.5, "traces": 1, "bytes": 10, "peak_rss_mb": 30.0}
        | {"python": None}
    ]


def test_a_summary_that_cannot_be_read_is_an_error_naming_the_node(tmp_path):
    found: dict = {}
    broken = tmp_path / "node_0.json.gz"
    broken.write_text("not gzip")
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars=run_vars(str(broken)))
    assert len(found["summaries"]) == 1 and found["summaries"][0]["error"].startswith(
        f"a: {broken}: not a node summary"
    )
    assert found["node_analysis"] == []


def test_node_0_excluded_gives_the_heads_ranks_per_node_not_0():
    found: dict = {}
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars=run_vars(head="b"))
    assert found["gpus_per_node"] == 2


def test_what_the_task_gives_wins_and_a_folder_alone_has_no_nodes():
    found: dict = {}
    given = {"traces_dir": "/t", "report_dir": "/r", "summaries": [], "clock_offsets": {"x": 1.0}, "gpus_per_node": 3}
    action(given, capture=found).run(task_vars=run_vars())
    assert (found["summaries"], found["clock_offsets"], found["gpus_per_node"]) == ([], {"x": 1.0}, 3)
    # trace_report.yml: no aorta_nodes group; the role's default aorta_gpus_per_node.
    found = {}
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars={"aorta_gpus_per_node": "8"})
    assert (found.get("summaries"), found["clock_offsets"], found["gpus_per_node"]) == (None, {}, 8)
    # The module used outside the collection's plays: nothing of the collection's variables.
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars={})
    assert found["gpus_per_node"] is None


def test_the_analysis_runs_in_process_with_the_nodes_clock_offsets(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 90, 50], bad_file=False)
    args = {"traces_dir": str(root), "report_dir": str(tmp_path / "out")}
    task_vars = {"groups": {"aorta_nodes": ["gpu-a", "gpu-b"]}, "hostvars": {}, "aorta_gpus_per_node": 2}
    task_vars["hostvars"]["gpu-b"] = {"aorta_prepare": {"derived": {"record": {"clock_offset_s": 2.0}}}}
    task_vars["aorta_verdict_ignores"] = ["straggler"]  # the slow rank stays a note
    out = action(args).run(task_vars=task_vars)
    assert not out.get("failed"), out
    assert out["verdict"]["verdict"] == "PASS" and out["verdict"]["ignored"] == ["straggler"]
    assert out["headline_lines"][1] == "straggler rank 2"
    assert out["headline_lines"][-1] == f"report: {tmp_path / 'out' / 'report.html'}"
    timeline = json.loads((tmp_path / "out" / "timeline.json").read_text())
    assert timeline["otherData"]["clock_offsets_s"] == {"gpu-b": 2.0}
    out = action(dict(args, report_dir=str(tmp_path / "dry")), check_mode=True).run(task_vars=task_vars)
    assert out["headline_lines"][-1] == "report: (check mode)" and not (tmp_path / "dry").exists()


def test_a_failed_analysis_has_no_headline(tmp_path):
    out = action({"traces_dir": str(tmp_path), "report_dir": str(tmp_path / "out")}).run(task_vars={})
    assert out["failed"] and "headline_lines" not in out


def test_the_headline_says_what_the_role_printed():
    result = {
        "status": "partial",
        "performance": {"avg_step_time_ms": 100.12345, "avg_iteration_time_ms": None, "avg_compute_ratio": 0.5},
        "slow_nodes": [{"node": "gpu-b"}],
        "stragglers": [{"rank": 3}, {"rank": 5}],
        "validation": {"checks": [{"passed": True, "reason": "ok"}, {"passed": False, "reason": "too slow"}]},
        "report_warnings": ["two world sizes"],
        "errors": [{"file": "x", "error": "x: not a Kineto trace"}],
        "baseline": {"verdict": "regression", "reason": "12% slower"},
        "html": "/r/report.html",
    }
    assert headline_lines(result) == [
        "report partial: avg step 100.123 ms (profiled window, CVS iteration 0 ms), compute ratio 0.5, overlap 0",
        "slow node gpu-b",
        "straggler rank 3",
        "straggler rank 5",
        "FAIL too slow",
        "WARNING two world sizes",
        "x: not a Kineto trace",
        "baseline: regression - 12% slower",
        "report: /r/report.html",
    ]
    plain = headline_lines({"status": "completed", "performance": {}, "baseline": {"verdict": "same", "reason": ""}})
    assert plain == [
        "report completed: avg step 0 ms (profiled window, CVS iteration 0 ms), compute ratio 0, overlap 0",
        "baseline: same",
        "report: (check mode)",
    ]


def test_empty_folders_mean_the_runs_own_and_a_folder_alone_gets_its_report_beside():
    found: dict = {}
    run_dir = {"aorta_results_dir_resolved": "/res/r1"}
    action({"traces_dir": "", "report_dir": ""}, capture=found).run(task_vars=run_dir)
    assert (found["traces_dir"], found["report_dir"]) == ("/res/r1/combined_traces", "/res/r1")
    action({"traces_dir": "/t", "report_dir": ""}, capture=found).run(task_vars={})
    assert (found["traces_dir"], found["report_dir"]) == ("/t", "/t")
    action({"traces_dir": "/t", "report_dir": "/r"}, capture=found).run(task_vars=run_dir)
    assert (found["traces_dir"], found["report_dir"]) == ("/t", "/r")


def test_the_awx_stats_carry_the_headline_figures_once_for_the_run(tmp_path, combined_tree):
    root = combined_tree(tmp_path, [50, 50, 90, 50], bad_file=False)
    args = {"traces_dir": str(root), "report_dir": str(tmp_path / "out")}
    task_vars = {"aorta_gpus_per_node": 2, "aorta_verdict_ignores": ["straggler"]}
    out = action(args).run(task_vars=task_vars)
    stats = out["ansible_stats"]
    assert (stats["per_host"], stats["aggregate"]) == (False, True)
    data = stats["data"]
    assert data["aorta_report_html"] == str(tmp_path / "out" / "report.html")
    assert data["aorta_straggler_ranks"] == [2] and data["aorta_avg_step_time_ms"] > 0
    assert set(data) == {
        "aorta_report_status", "aorta_report", "aorta_report_html", "aorta_avg_iteration_time_ms",
        "aorta_avg_step_time_ms", "aorta_avg_compute_ratio", "aorta_avg_comm_ratio", "aorta_avg_overlap_ratio",
        "aorta_straggler_ranks", "aorta_slow_nodes", "aorta_thresholds_passed", "aorta_baseline_verdict",
    }  # fmt: skip
    # Not the verdict: run_outcome sets aorta_verdict, and set_stats' aggregate would join two strings.
    dry = action(dict(args, report_dir=str(tmp_path / "dry")), check_mode=True).run(task_vars=task_vars)
    assert dry["ansible_stats"] == {}
