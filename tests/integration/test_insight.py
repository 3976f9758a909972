# SPDX-License-Identifier: GPL-3.0-or-later
"""Trace insight on the real 2-node stand-in cluster: ten healthy runs (conftest's healthy_series,
shared with test_faults) name no straggler and no slow node, a rank planted at 1.5x compute is named
first with its node every time, the first of those finds the newest healthy run as its baseline by
itself and says regression naming that rank, trace_report.yml says the same, and one results root
then holds healthy, slow and killed runs in its history, each with its junit.xml."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from conftest import STRAGGLER_PROFILE, read_junit

pytestmark = pytest.mark.standin

PROFILE = STRAGGLER_PROFILE  # conftest's: the healthy series ran with it
SLOW = {**PROFILE, "standin.slow_rank": 2, "standin.slow_factor": 1.5}


def report_of(results) -> dict:
    return json.loads((results / "aorta_benchmark_report.json").read_text())


def junit_failures(results) -> dict:
    """``{"classname: name": message}`` of every failed testcase of a run's junit.xml (checked
    against the published schema and read by junitparser: conftest.read_junit)."""
    return {key: message for key, (outcome, message) in read_junit(results).items() if outcome == "failure"}


@pytest.mark.xdist_group("healthy_series")
def test_stragglers_and_baseline_on_the_stand_in_cluster(standin_cluster, healthy_series):
    # The healthy runs are conftest's healthy_series, shared with test_faults' ten runs in a row;
    # this test's own runs go into the same results root, beside them.
    tmp_path, inventory = healthy_series.root, healthy_series.inventory
    node_of_rank_2 = standin_cluster.nodes[1]["mgmt_ip"]  # 2 ranks per node: ranks 2 and 3

    def run(overrides, **extra):
        _proc, record, results, _seconds = standin_cluster.run(
            tmp_path, inventory=inventory, aorta_training_overrides=overrides, **extra
        )
        assert record["status"] == "COMPLETED", record["message"]
        return results, report_of(results)

    # Ten healthy runs name no straggler; the second, against the first, is no regression (within
    # 15%: the 1.5x rank below slows the step by about 30%).
    for _proc, record, _results, _seconds in healthy_series.runs:
        assert record["status"] == "COMPLETED", record["message"]
    baseline = healthy_series.runs[0][2]
    second = report_of(healthy_series.runs[1][2])
    # The last with one threshold it cannot meet: the verdict fails, the play exits non-zero, and
    # the other three thresholds are kept (merged key by key over CVS's defaults).
    last_proc, _record, last_healthy, _seconds = healthy_series.runs[-1]
    assert_threshold_fails_the_verdict(last_healthy, report_of(last_healthy), last_proc)
    for _proc, _record, results, _seconds in healthy_series.runs:
        report = report_of(results)
        assert report["straggler_test"]["steps"] == 6, report["straggler_test"]
        assert report["stragglers"] == [] and report["straggler_test"]["verdict"] == "none stands out"
        assert report["slow_nodes"] == [], report["straggler_test"]["node_test"]
    assert second["baseline"]["verdict"] in ("same", "within noise"), second["baseline"]

    # Three runs with rank 2 at 1.5x compute: named first with its node, a regression every time;
    # the first finds its baseline by itself (aorta_baseline: auto): the newest healthy run, whose
    # fingerprint is the same (standin.* keys do not change a step's work).
    slow_runs = []
    for attempt in range(3):
        results, report = run(SLOW, aorta_baseline="auto" if attempt == 0 else str(baseline))
        if attempt == 0:
            assert report["baseline"]["source"].startswith(str(last_healthy)), report["baseline"]
            newest_healthy = json.loads((last_healthy / "run.json").read_text())["run_id"]
            assert newest_healthy in report["baseline"]["chosen"], report["baseline"]
        first_named = report["stragglers"][0]
        assert (first_named["rank"], first_named["node"]) == (2, node_of_rank_2), first_named
        assert report["baseline"]["verdict"] == "regression", report["baseline"]
        # The regression names the slow rank, in the report JSON and on the page.
        assert report["baseline"]["stands_out"].startswith(f"stands out: rank 2 on {node_of_rank_2} ("), report
        assert report["baseline"]["stands_out"] in (results / "report.html").read_text()
        slow_runs.append(results)

    # The same verdict from trace_report.yml on a finished run's traces.
    out = tmp_path / "again"
    proc = standin_cluster.tool(
        "ansible-playbook",
        "trace_report.yml",
        "-e",
        json.dumps(
            {
                "aorta_traces_dir": str(slow_runs[0] / "combined_traces"),
                "aorta_report_dir": str(out),
                "aorta_baseline": str(baseline),
            }
        ),
    )
    # A regression and a slow rank are findings: the report is written, then the task fails.
    assert proc.returncode != 0 and "found: straggler: rank 2 on node " in proc.stdout, proc.stdout[-3000:]
    assert report_of(out)["verdict"]["findings"] == ["straggler", "baseline_regression"], report_of(out)["verdict"]
    assert report_of(out)["baseline"]["verdict"] == "regression"
    assert report_of(out)["baseline"]["source"].startswith(str(baseline))

    # One run whose workload is killed on the last node once every rank trains: FAILED, that node
    # named; the same results root (tmp_path) now holds healthy, slow and failed runs.
    run_id = "killed-" + uuid.uuid4().hex[:6]
    last = len(standin_cluster.nodes) - 1

    def kill_the_workload():
        for container in standin_cluster.containers_of(run_id, [last]):
            standin_cluster.node_exec(last, "docker", "kill", container)

    proc, killed, _ended_after = standin_cluster.run_with_fault(
        tmp_path, run_id, kill_the_workload, deadline=900, grace=10
    )
    killed_run = json.loads((killed / "run.json").read_text())
    assert proc.returncode != 0 and killed_run["status"] == "FAILED", killed_run["message"]
    victim = standin_cluster.nodes[last]["mgmt_ip"]
    assert killed_run["verdict"]["verdict"] == "FAIL" and killed_run["first_failure"] == victim
    assert proc_tail(killed).startswith("verdict FAIL: FAILED on ")
    assert_history_and_junit(tmp_path, baseline, slow_runs[0], killed, victim)
    assert_auto_refuses_another_image(standin_cluster, tmp_path, baseline, slow_runs[0])


def assert_threshold_fails_the_verdict(results: Path, report: dict, proc) -> None:
    """One threshold not met: exit non-zero; FAIL in run.json, the report's first row and the console's
    last verdict line; the three thresholds not given kept."""
    assert proc.returncode != 0, proc.stdout[-2000:]
    verdict = json.loads((results / "run.json").read_text())["verdict"]
    assert verdict["verdict"] == "FAIL" and verdict["reasons"][0].startswith("threshold max_avg_iteration_ms: ")
    assert len(report["validation"]["checks"]) == 4 and report["verdict"] == verdict
    page = (results / "report.html").read_text()
    first_row = page.index("id='verdict'")
    assert first_row < page.index("id='run-status'") and "FAIL" in page[first_row : first_row + 400]
    lines = proc.stdout.splitlines()
    said = [number for number, line in enumerate(lines) if line.startswith("verdict ")]
    assert [lines[number] for number in said] == [f"verdict FAIL: {verdict['reasons'][0]}"], lines[-30:]
    # The run's own last line: after the report's, before only Ansible's failure of the play.
    assert said[0] > max(number for number, line in enumerate(lines) if line.startswith("report: "))


def proc_tail(results: Path) -> str:
    """The verdict line the run printed last before the play failed (its output file)."""
    out = results.parent / f"{results.name.removeprefix('results-')}.out"
    lines = [line for line in out.read_text().splitlines() if line.startswith("verdict ")]
    return lines[-1]


def assert_history_and_junit(root: Path, healthy: Path, slow: Path, killed: Path, victim: str) -> None:
    """index.json and index.html list every run of the root with its status and links; junit.xml
    fails nothing for a healthy run, fails the killed node's run testcase with its reason and the
    others' as stopped after it."""
    index = json.loads((root / "index.json").read_text())
    rows = {row["dir"]: row for row in index["runs"]}
    assert rows[healthy.name]["status"] == rows[slow.name]["status"] == "COMPLETED"
    assert rows[killed.name]["status"] == "FAILED" and rows[killed.name]["verdict"]["verdict"] == "FAIL"
    assert len(rows) == 14  # ten healthy (conftest's healthy_series), three slow, one killed
    page = (root / "index.html").read_text()
    assert "<script" not in page and f'href="{healthy.name}/report.html"' in page
    assert f'href="{slow.name}/report.html"' in page and f'href="{killed.name}/' in page
    assert '<span class="FAILED">FAILED</span>' in page and '<span class="COMPLETED">COMPLETED</span>' in page
    assert junit_failures(healthy) == {}
    failures = junit_failures(killed)
    own = [message for key, message in failures.items() if key.startswith(f"aorta.{victim}:") and key.endswith(": run")]
    # Its own reason: how its run ended (the workload killed: exit 137 or the like), not another node.
    assert own and own[0].startswith("failed, exit ") and "stopped after" not in own[0], failures
    others = [message for key, message in failures.items() if victim not in key and key.endswith(": run")]
    assert others and all(f"stopped after node {victim}" in message for message in others), failures
    # The slow run's thresholds hold; its findings fail, and so its verdict (the straggler first):
    # junit.xml's failures and run.json's verdict agree.
    slow_failures = junit_failures(slow)
    assert "aorta.findings: stragglers" in slow_failures and "aorta.findings: baseline" in slow_failures
    others = [key for key in slow_failures if not key.startswith("aorta.findings")]
    assert others == ["aorta.run: verdict"] and slow_failures[others[0]].startswith("FAIL: straggler: rank 2 ")


def assert_auto_refuses_another_image(standin_cluster, root: Path, healthy: Path, slow: Path) -> None:
    """aorta_baseline: auto does not compare a run with one made from another image, and says why:
    trace_report.yml on a copy of the slow run beside a copy of the healthy run whose record names
    another image id (the stand-in has one workload image; the record is what the choice reads)."""
    other = root / "other-image"
    shutil.copytree(healthy, other / "healthy")
    shutil.copytree(slow, other / "slow", ignore=shutil.ignore_patterns("combined_traces"))
    record = json.loads((other / "healthy" / "run.json").read_text())
    record["context"]["image_id"] = "sha256:" + "0" * 64
    (other / "healthy" / "run.json").write_text(json.dumps(record))
    proc = standin_cluster.tool(
        "ansible-playbook",
        "trace_report.yml",
        "-e",
        json.dumps(
            {
                "aorta_traces_dir": str(slow / "combined_traces"),
                "aorta_report_dir": str(other / "slow"),
                "aorta_baseline": "auto",
            }
        ),
    )
    # The slow rank is a finding: the report is written, then the task fails naming it.
    assert proc.returncode != 0 and "found: straggler: rank 2 " in proc.stdout, proc.stdout[-3000:]
    found = report_of(other / "slow")["baseline"]
    assert found["verdict"] == "not compared" and found["reason"].startswith("no comparable run"), found
    assert "image" in found["reason"], found
