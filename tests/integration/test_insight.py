# SPDX-License-Identifier: GPL-3.0-or-later
"""Trace insight on the real 2-node stand-in cluster: five healthy runs name no straggler and no slow
node, a rank planted
at 1.5x compute is named first with its node every time, and trace_report.yml against a healthy
baseline says regression for the slow runs and not for a healthy one."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.standin

# Six profiled steps of 50 ms compute (8 steps; wait 1, warmup 1): the straggler test needs 4 steps
# to name one of 4 ranks at 5%, and 5 ms steps on two shared cores are noise.
PROFILE = {
    "training.max_steps": 8,
    "profiling.wait": 1,
    "profiling.warmup": 1,
    "profiling.active": 8,
    "standin.compute_ms": 50,
}
SLOW = {**PROFILE, "standin.slow_rank": 2, "standin.slow_factor": 1.5}


def report_of(results) -> dict:
    return json.loads((results / "aorta_benchmark_report.json").read_text())


def test_stragglers_and_baseline_on_the_stand_in_cluster(standin_cluster, tmp_path):
    inventory = standin_cluster.cluster_file(tmp_path, 2)
    node_of_rank_2 = standin_cluster.nodes[1]["mgmt_ip"]  # 2 ranks per node: ranks 2 and 3

    def run(overrides, **extra):
        _proc, record, results, _seconds = standin_cluster.run(
            tmp_path, inventory=inventory, aorta_training_overrides=overrides, **extra
        )
        assert record["status"] == "COMPLETED", record["message"]
        return results, report_of(results)

    # Two healthy runs name no straggler; the second, against the first, is no regression. Two
    # healthy runs on this shared 2-core machine differed by 10.6% in step time once (57.8 vs
    # 64.0 ms, both run alone), beyond the 2-sigma noise of their own steps (6.1 ms): the verdict
    # sees each run's step-to-step spread, not the machine's run-to-run drift, so this comparison
    # allows 15% (the 1.5x rank below slows the step by about 30%).
    baseline, first = run(PROFILE)
    _again, second = run(PROFILE, aorta_baseline=str(baseline), aorta_baseline_tolerance=0.15)
    healthy = [first, second] + [run(PROFILE)[1] for _run in range(3)]
    for report in healthy:
        assert report["straggler_test"]["steps"] == 6, report["straggler_test"]
        assert report["stragglers"] == [] and report["straggler_test"]["verdict"] == "none stands out"
        assert report["slow_nodes"] == [], report["straggler_test"]["node_test"]
    assert second["baseline"]["verdict"] in ("same", "within noise"), second["baseline"]

    # Three runs with rank 2 at 1.5x compute: named first with its node, a regression every time.
    slow_runs = []
    for _run in range(3):
        results, report = run(SLOW, aorta_baseline=str(baseline))
        first_named = report["stragglers"][0]
        assert (first_named["rank"], first_named["node"]) == (2, node_of_rank_2), first_named
        assert report["baseline"]["verdict"] == "regression", report["baseline"]
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
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report_of(out)["baseline"]["verdict"] == "regression"
    assert report_of(out)["baseline"]["source"].startswith(str(baseline))
