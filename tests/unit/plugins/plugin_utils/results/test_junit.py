# SPDX-License-Identifier: GPL-3.0-or-later
"""One run as JUnit XML: every document is read back by a JUnit reader (junitparser) and checked
against a published JUnit schema (tests/fixtures/junit/junit-10.xsd); runs are docs/samples/run.json
changed the way a failure changes it, or made by _record.record from the nodes' results."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import xmlschema
import yaml
from junitparser import Failure, JUnitXml, Skipped

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _diagnosis, _outcome, _run
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _junit as junit
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _record as rr
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt

REPO = Path(__file__).resolve().parents[5]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
SCHEMA = xmlschema.XMLSchema(str(REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd"))
RUN_DATA = Path(__file__).parent / "run_data"
HEAD, WORKER = (row["name"] for row in SAMPLE["nodes"])
SETTINGS = {
    "aorta_run_id_resolved": SAMPLE["run_id"],
    "aorta_results_dir_resolved": "/r",
    "aorta_docker_image": "img:1",
    "aorta_base_config": "config/standin.yaml",
    "aorta_training_overrides": {},
    "aorta_run_started_epoch": SAMPLE["started_epoch"],
}


def sample() -> dict:
    """The healthy sample run, without the verdict another step adds."""
    run = copy.deepcopy(SAMPLE)
    run.pop("verdict", None)
    return run


def report(**extra) -> dict:
    """A healthy report's keys this module reads: two thresholds met, no finding."""
    checks = [
        {"name": "max_avg_iteration_ms", "threshold": 500.0, "value": 120.0, "passed": True, "reason": "within"},
        {"name": "min_compute_ratio", "threshold": 0.5, "value": 0.8, "passed": True, "reason": "within"},
    ]
    base = {
        "validation": {"passed": True, "checks": checks},
        "slow_nodes": [],
        "stragglers": [],
        "straggler_test": {"verdict": "none stands out", "node_test": {"verdict": "no node stands out"}},
    }
    return base | extra


def sweep(*slow: dict, **extra) -> dict:
    """run.json's ``fabric_sweep`` as the head's judgement writes it: 3 nodes, 3 rounds of TCP,
    naming ``slow``."""
    found = {
        "ran": True,
        "tool": "tcp",
        "seconds": 10.0,
        "threshold": 0.5,
        "min_gbps": None,
        "median_gbps": 3.812,
        "localisable": True,
        "reason": None,
        "rounds": [
            {"round": r, "shift": s, "pairs": 3, "figures": 6, "median_gbps": 3.8} for r, s in enumerate((1, 2))
        ],
        "slow": list(slow),
        "unresolved": [],
        "unresolved_count": 0,
        "not_measured": [],
        "not_measured_count": 0,
    }
    return found | extra


# The throttled worker as the sweep names it: sends at 0.19 Gbit/s, receives at full rate.
SLOW_WORKER = {
    "node": WORKER,
    "rank": 1,
    "direction": "send",
    "send_gbps": 0.19,
    "recv_gbps": 3.7,
    "median_gbps": 3.812,
    "ratio": 0.05,
    "rounds": 2,
}


def cases_of(text: str) -> dict[str, tuple]:
    """``{"classname: name": (outcome, message, detail, type)}`` of a document that the schema
    accepts and junitparser reads, its counts agreeing with its testcases."""
    SCHEMA.validate(text)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    suites = list(JUnitXml.fromstring(text))
    assert len(suites) == 1
    found = {}
    for case in suites[0]:
        results = list(case.result)
        assert len(results) <= 1
        result = results[0] if results else None
        outcome = {Failure: "failure", Skipped: "skipped", type(None): ""}[type(result)]
        if result is not None:
            assert "\n" not in result.message and 0 < len(result.message) <= junit.MESSAGE_CHARS
        key = f"{case.classname}: {case.name}"
        assert key not in found
        found[key] = (
            outcome,
            result.message if result else None,
            result.text if result else None,
            result and result.type,
        )
    assert suites[0].tests == len(found)
    assert suites[0].failures == sum(1 for c in found.values() if c[0] == "failure")
    assert suites[0].skipped == sum(1 for c in found.values() if c[0] == "skipped")
    assert suites[0].errors == 0
    return found


def failures(found: dict) -> dict[str, str]:
    return {key: case[1] for key, case in found.items() if case[0] == "failure"}


def node(name: str, rank: int, stage: str) -> str:
    return f"aorta.{name}: rank {rank} {name}: {stage}"


def test_a_healthy_run_with_a_healthy_report_has_no_failure():
    run = sample()
    run["verdict"] = {"verdict": "PASS", "reasons": []}
    run["fabric_sweep"] = sweep()
    text = junit.junit_xml(run, report())
    found = cases_of(text)
    assert failures(found) == {}
    assert list(found) == [
        "aorta.run: status",
        "aorta.run: verdict",
        *(node(n, r, stage) for r, n in enumerate((HEAD, WORKER)) for stage in junit.STAGES),
        "aorta.thresholds: max_avg_iteration_ms",
        "aorta.thresholds: min_compute_ratio",
        "aorta.findings: slow nodes",
        "aorta.findings: stragglers",
        "aorta.findings: slow link",
        "aorta.findings: drift",
        "aorta.findings: link errors",
        "aorta.findings: baseline",
    ]
    assert found["aorta.findings: slow link"][0] == ""
    assert found["aorta.findings: baseline"][:2] == ("skipped", "no baseline given (aorta_baseline)")
    suite = next(iter(JUnitXml.fromstring(text)))
    assert suite.name == f"aorta.cluster run {SAMPLE['run_id']}"
    assert suite.time == SAMPLE["finished_epoch"] - SAMPLE["started_epoch"]
    assert suite.timestamp == "2026-12-02T04:26:24+00:00"
    assert {p.name: p.value for p in suite.properties()} == {
        "run_id": SAMPLE["run_id"],
        "status": "COMPLETED",
        "verdict": "PASS",
    }


def failed_mid_run(tmp_path: Path) -> dict:
    """The sample after the worker's rank 3 raised and the head's ranks lost their peer: each node's
    torchrun log as a real run wrote it, the status and diagnosis made from them as run_record does."""
    run = sample()
    (tmp_path / "logs").mkdir()
    for row, log in zip(run["nodes"], ("torchrun_peer_failure.log", "torchrun_own_failure.log")):
        text = (RUN_DATA / log).read_text()
        (tmp_path / "logs" / f"{row['name']}.log").write_text(text)
        row.update(state="failed", exit_code=1, failure=_run.torchrun_failure(text))
    run.update(_run.run_status(run["nodes"]))
    run["diagnosis"] = _diagnosis.diagnose_run(str(tmp_path), run["status"], run["nodes"], 2)
    return run


def test_a_node_that_failed_mid_run_fails_with_its_reason_and_the_others_stopped_after_it(tmp_path):
    run = failed_mid_run(tmp_path)
    assert (run["status"], run["first_failure"]) == ("FAILED", WORKER)
    found = cases_of(junit.junit_xml(run, report()))
    assert set(failures(found)) == {"aorta.run: status", node(HEAD, 0, "run"), node(WORKER, 1, "run")}
    own = found[node(WORKER, 1, "run")]
    assert own[1] == "failed, exit 1: rank 3 exit 1 at 2026-11-30_05:28:44" and own[3] == "failed"
    assert "steps per rank: 2: 6, 3: 6" in own[2] and f"diagnosis: {run['diagnosis']['summary']}" in own[2]
    other = found[node(HEAD, 0, "run")]
    assert other[1] == f"stopped after node {WORKER} failed: rank 3 exit 1 at 2026-11-30_05:28:44"
    # The head's own facts stay in the detail: its ranks died of the peer's failure.
    assert "rank 1 exit 1 at 2026-11-30_05:28:45 after a peer failed" in other[2]
    assert found["aorta.run: status"][1] == run["message"]
    assert found[node(HEAD, 0, "collect")][0] == ""


def test_a_timeout_names_the_node_the_others_waited_for(tmp_path):
    run = sample()
    for row, steps in zip(run["nodes"], (6, 2)):
        row.update(state="timeout", exit_code=-1, progress={str(2 * row["rank"]): 6, str(2 * row["rank"] + 1): steps})
    run.update(_run.run_status(run["nodes"]))
    run["diagnosis"] = _diagnosis.diagnose_run(str(tmp_path), run["status"], run["nodes"], 2)
    found = cases_of(junit.junit_xml(run, None))
    assert (run["status"], run["first_failure"]) == ("TIMEOUT", WORKER)
    assert found[node(WORKER, 1, "run")][1].startswith("timeout, exit -1: rank 3")
    assert found[node(HEAD, 0, "run")][1].startswith(f"timed out waiting for node {WORKER}: rank 3")
    assert found[node(HEAD, 0, "run")][3] == "timeout"


def setup_run(hostvars: dict, names: list[str]) -> dict:
    """run.json as run_record writes it after the launch play's rescue (its facts on the nodes)."""
    found = rr.record(SETTINGS, hostvars, {"aorta_nodes": names}, SAMPLE["finished_epoch"], diagnose=lambda *a: {})
    return found["run_json"]


def test_a_setup_that_stopped_at_preflight_skips_the_later_stages_saying_why():
    probe = "Probe every node, hold it for this run and prove the fabric"
    gpus = "preflight[gpu]: c: 4 GPUs seen by amd-smi, 8 needed (aorta_gpus_per_node)"
    run = setup_run(
        {
            "a": {
                "aorta_node_rank": 0,
                "aorta_node_setup_task": probe,
                "aorta_node_setup_result": {"failed": True, "msg": "preflight[docker]: a: no docker"},
            },
            # Not probed: the head failed first.
            "b": {"aorta_node_rank": 1, "aorta_prepare": {"failed": True, "own": False, "msg": "head failed"}},
            "c": {
                "aorta_node_rank": 2,
                "aorta_prepare": {"failed": True, "failures": [gpus]},
                "aorta_node_setup_task": probe,
                "aorta_node_setup_result": {"failed": True, "msg": "preflight failed"},
            },
        },
        ["a", "b", "c"],
    )
    assert (run["status"], run["first_failure"], run["combined_traces"]) == ("FAILED", "a", None)
    found = cases_of(junit.junit_xml(run, None))
    assert failures(found) == {
        "aorta.run: status": f"FAILED: a: {probe}: preflight[docker]: a: no docker (setup failed on 2 nodes: a, c)",
        node("a", 0, "health"): f"a: {probe}: preflight[docker]: a: no docker",
        node("c", 2, "health"): gpus,
    }
    # The node's own reason first; the run's message, which names every node that failed, after it.
    assert found[node("a", 0, "health")][2] == f"a: {probe}: preflight[docker]: a: no docker\n{run['message']}"
    assert found[node("a", 0, "health")][3] == found[node("c", 2, "health")][3] == "preflight"
    skipped = {key: case[1] for key, case in found.items() if case[0] == "skipped"}
    for stage in ("launch", "run", "collect"):
        for name, rank in (("a", 0), ("b", 1), ("c", 2)):
            assert skipped[node(name, rank, stage)] == "not launched: setup stopped on node a"
    assert skipped[node("b", 1, "health")] == "not probed: setup stopped on node a"
    assert skipped["aorta.thresholds: thresholds"] == "no report: not launched: setup stopped on node a"


def test_a_setup_that_stopped_at_the_launch_fails_that_nodes_launch():
    # The task name the rescue records is the role's own.
    tasks = yaml.safe_load((REPO / "roles" / "container_launch" / "tasks" / "main.yml").read_text())
    assert tasks[0]["name"] == junit.LAUNCH_TASK
    probed = {"derived": {"fabric_if": "eth1", "fingerprint": {"kernel": "6.8"}, "health": {"gpus": 8}}}
    run = setup_run(
        {
            "a": {
                "aorta_node_rank": 0,
                "aorta_prepare": probed,
                "aorta_node_setup_task": junit.LAUNCH_TASK,
                "aorta_node_setup_result": {"failed": True, "msg": "docker run: no such image"},
            },
            "b": {"aorta_node_rank": 1, "aorta_prepare": probed},  # stopped by any_errors_fatal
        },
        ["a", "b"],
    )
    found = cases_of(junit.junit_xml(run, None))
    assert set(failures(found)) == {"aorta.run: status", node("a", 0, "launch")}
    assert found[node("a", 0, "launch")][1] == f"a: {junit.LAUNCH_TASK}: docker run: no such image"
    assert found[node("a", 0, "health")][0] == found[node("b", 1, "health")][0] == ""
    assert found[node("b", 1, "launch")][1] == "not launched: setup stopped on node a"
    assert found[node("a", 0, "run")][1] == "not launched: setup stopped on node a"


def test_a_run_the_user_stopped_before_launch_skips_the_launch_and_names_no_node_unhealthy():
    # What node_launch answers on every node once the user's stop is claimed before launch, kept by
    # the launch play's rescue; run_record then writes STOPPED.
    probed = {"derived": {"fabric_if": "eth1", "fingerprint": {"kernel": "6.8"}, "health": {"gpus": 8}}}
    stop = {"reason": "SIGINT on the controller", "phase": "before launch", "signal": "SIGINT"}
    hostvars = {
        name: {
            "aorta_node_rank": rank,
            "aorta_prepare": probed,
            "aorta_node_setup_task": junit.LAUNCH_TASK,
            "aorta_node_setup_result": _interrupt.refused(stop),
        }
        for rank, name in enumerate(("a", "b"))
    }
    found = rr.record(
        dict(SETTINGS, aorta_stop_request=stop),
        hostvars,
        {"aorta_nodes": ["a", "b"]},
        SAMPLE["finished_epoch"],
        diagnose=lambda *a: {},
    )
    run = found["run_json"]
    assert run["status"] == "STOPPED" and run["unhealthy"] == [], run["unhealthy"]
    cases = cases_of(junit.junit_xml(run, None))
    assert failures(cases) == {}
    for name, rank in (("a", 0), ("b", 1)):
        assert cases[node(name, rank, "health")][0] == ""
        for stage in ("launch", "run", "collect"):
            assert cases[node(name, rank, stage)][:2] == ("skipped", "not launched: stopped by the user")
    assert cases["aorta.run: status"][0] == "skipped"


def test_a_failed_threshold_is_one_failing_testcase_with_its_reason():
    checks = report()["validation"]["checks"]
    reason = "max_avg_iteration_ms: measured 612.5 exceeds threshold 500.0"
    checks[0] |= {"value": 612.5, "passed": False, "reason": reason}
    skipped = "max_time_variance_ratio: not judged: the average iteration time is 0 ms (CVS skips it too)"
    checks.append({"name": "max_time_variance_ratio", "passed": True, "skipped": True, "reason": skipped})
    found = cases_of(junit.junit_xml(sample(), report(validation={"passed": False, "checks": checks})))
    assert failures(found) == {"aorta.thresholds: max_avg_iteration_ms": reason}
    assert found["aorta.thresholds: max_avg_iteration_ms"][2:] == ("measured 612.5, threshold 500.0", "threshold")
    assert found["aorta.thresholds: min_compute_ratio"][0] == ""
    assert found["aorta.thresholds: max_time_variance_ratio"][:2] == ("skipped", skipped)
    # No threshold asked for: said once.
    found = cases_of(junit.junit_xml(sample(), report(validation={"passed": True, "checks": []})))
    assert found["aorta.thresholds: thresholds"][:2] == ("skipped", "no threshold set (aorta_expected_results)")


def test_a_report_of_no_trace_judges_no_threshold_as_the_verdict_does():
    """A run stopped before its profiler wrote: its checks say 'no value', which the verdict does not
    count; junit.xml skips the thresholds saying so, instead of failing every one."""
    no_value = {"name": "max_avg_iteration_ms", "passed": False, "reason": "max_avg_iteration_ms: no value"}
    empty = report(validation={"passed": False, "checks": [no_value]}, no_trace="no trace found in /t")
    found = cases_of(junit.junit_xml(sample(), empty))
    assert found["aorta.thresholds: thresholds"][:2] == ("skipped", "thresholds not judged: no trace found in /t")
    assert failures(found) == {}


def test_without_a_report_the_report_testcases_are_skipped_and_drift_still_judged():
    run = sample()
    run.pop("fabric_sweep", None)  # a run.json of an earlier version
    run["drift"] = [
        {
            "field": "kernel",
            "label": "kernel",
            "majority": None,
            "count": 2,
            "of": 2,
            "nodes": [[HEAD, "6.8"], [WORKER, "6.9"]],
        }
    ]
    found = cases_of(junit.junit_xml(run, None))
    for key in ("aorta.thresholds: thresholds", "aorta.findings: slow nodes", "aorta.findings: stragglers"):
        assert found[key][:2] == ("skipped", "no report: the report was not made")
    assert found["aorta.findings: slow link"][:2] == (
        "skipped",
        "no fabric sweep in run.json (a run of an earlier version)",
    )
    assert failures(found) == {
        "aorta.findings: drift": f"kernel: 2 of 2 nodes differ, no majority: {HEAD} (6.8), {WORKER} (6.9)"
    }
    run["combined_traces"] = None
    assert cases_of(junit.junit_xml(run, None))["aorta.findings: baseline"][1] == "no report: no traces were collected"


def test_a_slow_link_fails_naming_the_node_with_its_evidence_passes_when_none_and_is_skipped_saying_why():
    run = sample()
    run["fabric_sweep"] = sweep(SLOW_WORKER)
    # Without a report: run.json's own figures.
    found = cases_of(junit.junit_xml(run, None))
    own = f"{WORKER}: fabric 0.19 Gbit/s sent against a median of 3.81 Gbit/s (0.05x)"
    assert failures(found)["aorta.findings: slow link"] == own
    assert found["aorta.findings: slow link"][2:] == (own, "finding")
    # With the report: its slow_links add the collectives' figures.
    link = {
        "node": WORKER,
        "node_rank": 1,
        "direction": "send",
        "send_gbps": 0.19,
        "recv_gbps": 3.7,
        "median_gbps": 3.812,
        "ratio": 0.05,
        "collective_ratio": 1.4,
        "busbw_ratio": 0.3,
        "busbw_op": "allreduce",
    }
    found = failures(cases_of(junit.junit_xml(run, report(slow_links=[link]))))
    assert found == {
        "aorta.findings: slow link": f"{own}; collectives 1.4x the median node; allreduce busbw 0.3x the fabric"
    }
    # Two: both named, each with its line.
    run["fabric_sweep"] = sweep(SLOW_WORKER, dict(SLOW_WORKER, node=HEAD, rank=0, direction="both", send_gbps=0.4))
    (message, detail) = cases_of(junit.junit_xml(run, report(slow_links=[])))["aorta.findings: slow link"][1:3]
    assert message == (
        f"2 slow links: {own}; {HEAD}: fabric 0.4 Gbit/s sent, 3.7 Gbit/s received against a median of 3.81 "
        "Gbit/s (0.05x)"
    )
    assert detail.splitlines()[0] == own
    # Ran and named nobody: passes; could not localise, or did not run: skipped, saying why.
    run["fabric_sweep"] = sweep()
    assert cases_of(junit.junit_xml(run, report()))["aorta.findings: slow link"][:2] == ("", None)
    two_nodes = "2 node(s): every figure is of the same two ends, a slow one cannot be told from its peer"
    run["fabric_sweep"] = sweep(localisable=False, reason=two_nodes)
    assert cases_of(junit.junit_xml(run, report()))["aorta.findings: slow link"][:2] == (
        "skipped",
        f"fabric sweep cannot name a node: {two_nodes}",
    )
    run["fabric_sweep"] = {"ran": False, "why": "no node swept: aorta_fabric_sweep off, or no node reached the go"}
    assert cases_of(junit.junit_xml(run, report()))["aorta.findings: slow link"][:2] == (
        "skipped",
        "fabric sweep not run: no node swept: aorta_fabric_sweep off, or no node reached the go",
    )


def test_fabric_link_errors_that_grew_fail_their_finding_naming_the_node_and_the_counts():
    run = sample()
    run["link_errors"] = [{"node": WORKER, "interface": "ens51np0", "grew": {"rx_errors": 1204}}]
    found = cases_of(junit.junit_xml(run, report()))
    assert failures(found) == {"aorta.findings: link errors": f"{WORKER} (ens51np0): rx_errors +1204"}


def test_findings_fail_naming_the_node_or_rank_and_the_figure():
    slow = {"node": WORKER, "ranks": [2, 3], "excess_ratio": 0.234, "slowest_steps": 5, "steps": 6}
    straggler = {"rank": 1, "node": HEAD, "excess_ratio": 0.5, "slowest_steps": 6, "steps": 6}
    baseline = {
        "verdict": "regression",
        "reason": "",
        "tolerance": 0.05,
        "metrics": {"avg_step_time_ms": {"now": 130.0, "then": 100.0, "delta_ratio": 0.3}},
        "stands_out": f"stands out: slow node {WORKER} (+23% compute)",
    }
    done = report(slow_nodes=[slow], stragglers=[straggler], baseline=baseline)
    found = failures(cases_of(junit.junit_xml(sample(), done)))
    assert found == {
        "aorta.findings: slow nodes": f"node {WORKER}: compute +23% over the median node (ranks 2,3; slowest in 5 "
        "of 6 steps)",
        "aorta.findings: stragglers": f"rank 1 on node {HEAD}: compute +50% over the median rank (slowest in 6 of 6 "
        "steps)",
        "aorta.findings: baseline": "regression against the baseline: avg step time 130 ms against 100 ms (+30%), "
        f"beyond the 5% tolerance; stands out: slow node {WORKER} (+23% compute)",
    }
    two = report(stragglers=[straggler, dict(straggler, rank=3, node=WORKER)], slow_links=[])
    found = cases_of(junit.junit_xml(sample(), two))
    assert found["aorta.findings: stragglers"][1].startswith("2 stragglers: rank 1 on node")
    # Too few ranks to test, or a baseline that could not be compared: skipped, saying so.
    untested = {"verdict": "not tested: fewer than two ranks with profiled steps", "node_test": {"verdict": "x"}}
    lone = report(straggler_test=untested, baseline={"verdict": "not compared", "reason": "no step time"})
    found = cases_of(junit.junit_xml(sample(), lone))
    assert found["aorta.findings: stragglers"][:2] == ("skipped", untested["verdict"])
    assert found["aorta.findings: slow nodes"][0] == ""
    assert found["aorta.findings: baseline"][:2] == ("skipped", "not compared: no step time")


def test_the_findings_the_verdict_counts_are_the_failing_findings_and_an_ignored_one_is_skipped_saying_so():
    """junit.xml and the verdict read the same lines (_findings): a finding fails both, and a kind
    in aorta_verdict_ignores is a note in the verdict and a skipped testcase here, so a CI reading
    either sees the same run."""
    run = sample()
    run["fabric_sweep"] = sweep(SLOW_WORKER)
    run["verdict"] = _outcome.judge(run, None)
    found = cases_of(junit.junit_xml(run, None))
    own = f"{WORKER}: fabric 0.19 Gbit/s sent against a median of 3.81 Gbit/s (0.05x)"
    assert run["verdict"]["reasons"] == [f"slow link: {own}"] and run["verdict"]["findings"] == ["slow_link"]
    assert sorted(failures(found)) == ["aorta.findings: slow link", "aorta.run: verdict"]
    run["verdict"] = _outcome.judge(run, None, ["slow_link"])
    found = cases_of(junit.junit_xml(run, None))
    assert run["verdict"]["verdict"] == "PASS" and run["verdict"]["ignored"] == ["slow_link"]
    assert failures(found) == {}
    assert found["aorta.findings: slow link"][:2] == ("skipped", f"ignored (aorta_verdict_ignores): {own}")


def test_an_excluded_node_fails_its_health_and_skips_the_rest_with_the_reason():
    run = sample()
    reasons = ["preflight[health]: n3: 1 uncorrectable ECC error(s) on GPU 4"]
    run["nodes"].append({"name": "n3", "rank": None, "state": "excluded", "exit_code": None, "reasons": reasons})
    run["excluded"] = [{"name": "n3", "reasons": reasons}]
    found = cases_of(junit.junit_xml(run, report()))
    why = f"excluded as unhealthy: {reasons[0]}"
    assert failures(found) == {"aorta.n3: rank - n3: health": why}
    for stage in ("launch", "run", "collect"):
        assert found[f"aorta.n3: rank - n3: {stage}"][:2] == ("skipped", why)


def test_a_run_the_user_stopped_skips_the_run_stage():
    run = sample()
    run.update(status="STOPPED", message="stopped by the user after 3 steps")
    found = cases_of(junit.junit_xml(run, None))
    assert found[node(HEAD, 0, "run")][:2] == found[node(WORKER, 1, "run")][:2] == ("skipped", "stopped by the user")
    assert found["aorta.run: status"][:2] == ("skipped", "stopped by the user: stopped by the user after 3 steps")
    assert failures(found) == {}


def test_collect_fails_on_a_node_not_collected_and_is_skipped_without_a_collection():
    run = sample()
    run["combined_traces"] |= {"nodes_not_collected": [WORKER], "missing_ranks": [2, 3]}
    found = cases_of(junit.junit_xml(run, report()))
    assert failures(found) == {node(WORKER, 1, "collect"): "traces not collected from this node"}
    assert found[node(WORKER, 1, "collect")][2] == "missing ranks of the run: 2, 3"
    run["collection_error"] = f"{HEAD}: Read each node's end, tear down and collect: pull failed: EOF"
    found = cases_of(junit.junit_xml(run, report()))
    assert found[node(HEAD, 0, "collect")][1] == f"collection stopped: {run['collection_error']}"
    run["combined_traces"] = None
    found = cases_of(junit.junit_xml(run, None))
    assert found[node(WORKER, 1, "collect")][:2] == (
        "skipped",
        f"collection stopped on another node: {run['collection_error']}",
    )
    run["collection_error"] = None
    assert (
        cases_of(junit.junit_xml(run, None))[node(WORKER, 1, "collect")][1] == "no traces were collected for this run"
    )


def test_a_failing_verdict_fails_with_its_reasons():
    run = sample()
    run["verdict"] = {"verdict": "FAIL", "reasons": ["max_avg_iteration_ms not met", "1 straggler"]}
    found = cases_of(junit.junit_xml(run, report()))
    assert failures(found) == {"aorta.run: verdict": "FAIL: max_avg_iteration_ms not met; 1 straggler"}
    assert found["aorta.run: verdict"][2] == "max_avg_iteration_ms not met\n1 straggler"
    run["verdict"] = {"verdict": "FAIL", "reasons": []}
    assert failures(cases_of(junit.junit_xml(run, report()))) == {"aorta.run: verdict": "FAIL"}


@pytest.mark.parametrize("text", ["x" * 1000, "line one\nline two\x1b[31m red\x00", "é" * 400])
def test_messages_are_one_line_of_at_most_300_characters_and_xml_safe(text):
    run = sample()
    run.update(status="FAILED", message=text)
    found = cases_of(junit.junit_xml(run, None))
    message = found["aorta.run: status"][1]
    assert len(message) <= 300 and "\x1b" not in message and "\x00" not in message
    if len(text) > 300:
        assert message.endswith("\u2026")
    assert junit.one_line("a \n\t b") == "a b" and junit.one_line("abcdef", 4) == "abc\u2026"


def test_a_run_without_times_or_nodes_is_still_a_valid_document():
    run = {"run_id": "r1", "status": "FAILED", "message": "no nodes ran", "nodes": [], "started_epoch": None}
    text = junit.junit_xml(run, None)
    found = cases_of(text)
    assert failures(found) == {"aorta.run: status": "FAILED: no nodes ran"}
    suite = next(iter(JUnitXml.fromstring(text)))
    assert suite.timestamp is None and 'time="' not in text
