# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's record from the nodes' registered results, each figure once: the node rows, the health,
the status, the context, run.json and its console lines and AWX stats. docs/samples/run.json is
rebuilt, whole, from the results that made it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import ClusterFileError
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results as nr
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _record as rr

REPO = Path(__file__).resolve().parents[5]


SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


STANDIN_CONFIG = REPO / "tests" / "standin" / "workload" / "config" / "standin.yaml"


# What preflight puts in a row; node_end's node_result holds the rest.
FROM_PREFLIGHT = ("fingerprint", "health")


SETTINGS = {
    "aorta_run_id_resolved": SAMPLE["run_id"],
    "aorta_results_dir_resolved": SAMPLE["combined_traces"]["path"].rsplit("/", 1)[0],
    "aorta_docker_image": SAMPLE["context"]["image"],
    "aorta_base_config": SAMPLE["context"]["base_config"],
    "aorta_training_overrides": SAMPLE["context"]["overrides"],
    "aorta_run_failure_message": "",
    "aorta_run_failure_nodes": [],
    "aorta_run_started_epoch": SAMPLE["started_epoch"],
}


def sample_vars():
    """The hostvars (``host_values``) and groups that made docs/samples/run.json: each node's
    preflight, launch and end results, and localhost's collection."""
    hostvars, names = {}, []
    launch = {
        "head": SAMPLE["nodes"][0]["name"],
        "nnodes": 2,
        "nproc": 2,
        "launch_mode": "torchrun",
        "master_addr": SAMPLE["master_addr"],
        "master_port": SAMPLE["master_port"],
        "excluded_nodes": [],
    }
    for row in SAMPLE["nodes"]:
        names.append(row["name"])
        derived = {"fabric_if": row["fabric_if"], "record": {"clock_offset_s": 0.25 * row["rank"]}}
        derived |= {key: row[key] for key in FROM_PREFLIGHT}
        prepared = {"derived": derived, "facts": {"image_id": SAMPLE["context"]["image_id"]}}
        if row["rank"] == 0:
            # The stand-in's base config as the head read it: the sample's effective_config is it.
            prepared["facts"]["read"] = {"text": STANDIN_CONFIG.read_text()}
        result = {key: value for key, value in row.items() if key not in FROM_PREFLIGHT}
        if row["rank"] == 0:  # the head's supervisor holds the cluster's sweep; run.json lifts it out
            cluster = {key: value for key, value in SAMPLE["fabric_sweep"].items() if key != "ran"}
            result["fabric_sweep"] = dict(row["fabric_sweep"], cluster=cluster)
        hostvars[row["name"]] = {
            "aorta_node_rank": row["rank"],
            "aorta_mgmt_ip": row["mgmt_ip"],
            "aorta_vpc_ip": row["vpc_ip"],
            "aorta_prepare": prepared,
            "aorta_launch": dict(launch, rank=row["rank"]),
            "aorta_end": {"node_result": result, "collect": {"rank": row["rank"], "name": row["name"]}},
        }
    collected = SAMPLE["combined_traces"]
    hostvars["localhost"] = {
        "aorta_combined": {
            "files": collected["files"],
            "missing_ranks": collected["missing_ranks"],
            "manifest": {"nodes_not_collected": collected["nodes_not_collected"]},
        }
    }
    return hostvars, {"aorta_nodes": names, "all": [*names, "localhost"]}


def the_sample_diagnosis(results_dir, status, rows, nproc):
    assert (status, nproc, len(rows)) == ("COMPLETED", 2, 2)
    return copy.deepcopy(SAMPLE["diagnosis"])


def test_run_json_rebuilds_the_sample_whole_and_keeps_its_keys():
    hostvars, groups = sample_vars()
    found = rr.record(SETTINGS, hostvars, groups, SAMPLE["finished_epoch"], diagnose=the_sample_diagnosis)
    document = found["run_json"]
    # The integration tests compare a real run's run.json with the sample's keys: these are they
    # (the verdict is added last, by run_outcome: plugin_utils/results/_outcome.py).
    assert set(document) | {"verdict"} == set(SAMPLE)
    assert set(document["nodes"][0]) == set(SAMPLE["nodes"][0])
    assert set(document["context"]) == set(SAMPLE["context"])
    assert dict(document, verdict=SAMPLE["verdict"]) == SAMPLE
    assert found["status"] == {
        "status": "COMPLETED",
        "failed_nodes": [],
        "first_failure": None,
        "message": SAMPLE["message"],
    }
    assert found["diagnosis"] == SAMPLE["diagnosis"] and found["rows"] == SAMPLE["nodes"]
    assert found["lines"] == [
        f"run {SAMPLE['run_id']}: COMPLETED - all 2 nodes completed",
        "nodes: 2 (2 ok); fabric interface: eth1 on 2",
        f"results: {SETTINGS['aorta_results_dir_resolved']}",
    ]
    assert found["stats"]["data"]["aorta_manifest"].endswith("/combined_traces/manifest.json")


def test_a_node_that_never_ended_keeps_the_defaults_and_a_value_set_to_none_stays_none():
    rows = rr.node_rows(
        {
            "a": {"aorta_node_rank": 0, "aorta_vpc_ip": "10.1.0.1", "aorta_prepare": {"derived": None}},
            "b": {
                "aorta_node_rank": 1,
                "aorta_mgmt_ip": None,
                "aorta_vpc_ip": "10.1.0.2",
                "aorta_prepare": {"derived": {"fabric_if": None, "fingerprint": {"kernel": "6"}}},
                "aorta_end": {"node_result": {"state": "ok", "exit_code": 0, "rank": 1, "log": "/r/logs/b.log"}},
            },
        },
        {"aorta_nodes": ["a", "b", "gone"]},
    )
    base = {"state": "not_started", "exit_code": None, "log": None, "health": None, "fingerprint": None}
    assert rows[0] == {"name": "a", "rank": 0, "mgmt_ip": "a", "vpc_ip": "10.1.0.1", "fabric_if": "", **base}
    assert rows[1]["mgmt_ip"] is None and rows[1]["fabric_if"] is None and rows[1]["fingerprint"] == {"kernel": "6"}
    assert (rows[1]["state"], rows[1]["exit_code"], rows[1]["log"]) == ("ok", 0, "/r/logs/b.log")
    assert rows[2] == {"name": "gone", "rank": None, "mgmt_ip": "gone", "vpc_ip": None, "fabric_if": "", **base}


def test_health_reads_each_nodes_preflight_and_rescue():
    hostvars = {
        "a": {"aorta_prepare": {"failed": True, "failures": ["preflight[gpu]: a: 4 GPUs seen"]}},
        "b": {"aorta_node_setup_task": "Probe", "aorta_node_setup_result": {"failed": True, "msg": "unreachable"}},
        "c": {"aorta_prepare": {"failed": True, "own": False, "msg": "head failed"}},
    }
    rows = [{"name": name} for name in ("a", "b", "c")]
    found = rr.health(rows, hostvars, rr.fabric_sweep(rows))
    assert found["unhealthy"] == [
        {"name": "a", "reasons": ["preflight[gpu]: a: 4 GPUs seen"]},
        {"name": "b", "reasons": ["b: Probe: unreachable"]},
    ]
    assert found["unhealthy_text"] == "a\tpreflight[gpu]: a: 4 GPUs seen\nb\tb: Probe: unreachable\n"
    assert found["drift"] == [] and found["drift_lines"] == []
    assert found["excluded"] == []


def test_nodes_excluded_before_a_launch_that_never_came_are_run_jsons_excluded():
    """aorta_exclude_unhealthy with too few nodes left: no launch says who was excluded, so run.json's
    ``excluded`` comes from preflight, the same entries as ``unhealthy``."""
    gone = "preflight[ssh]: unreachable: a: timed out"
    hostvars = {
        "a": {"aorta_prepare": {"failed": False, "excluded": True, "reached": False, "msg": gone}},
        "b": {"aorta_prepare": {"failed": False, "excluded": True, "failures": ["preflight[disk]: b: full"]}},
    }
    rows = [{"name": "a", "state": "not_started"}, {"name": "b", "state": "not_started"}]
    found = rr.health(rows, hostvars, rr.fabric_sweep(rows))
    assert (
        found["excluded"]
        == found["unhealthy"]
        == [
            {"name": "a", "reasons": [gone]},
            {"name": "b", "reasons": ["preflight[disk]: b: full"]},
        ]
    )


def test_the_status_is_the_setups_failure_else_the_nodes():
    rows = [{"name": "a", "state": "ok"}, {"name": "b", "state": "ok"}]
    assert rr.status(rows)["status"] == "COMPLETED"
    assert rr.status(rows, "", ["a"])["message"] == "all 2 nodes completed"
    assert rr.status(rows, "a: Probe: unreachable", ["a", "b"]) == {
        "status": "FAILED",
        "failed_nodes": ["a", "b"],
        "first_failure": "a",
        "message": "a: Probe: unreachable",
    }
    assert rr.status([], "gone", [])["first_failure"] is None


def test_the_diagnosis_takes_one_rank_per_node_without_a_launch_and_survives_its_own_bug(monkeypatch):
    seen = []
    monkeypatch.setattr(rr, "diagnose_run", lambda *args: seen.append(args) or {"summary": "ok"})
    assert rr.diagnosis("/r", "FAILED", [], None) == {"summary": "ok"}
    assert rr.diagnosis("/r", "FAILED", [], 8) == {"summary": "ok"}
    assert [args[3] for args in seen] == [1, 8]

    def broken(*_args):
        raise KeyError("rank")

    monkeypatch.setattr(rr, "diagnose_run", broken)
    found = rr.diagnosis("/r", "TIMEOUT", [], 2)
    assert found["kind"] == "none" and found["summary"] == "TIMEOUT: no diagnosis (KeyError: 'rank')"


def test_the_context_is_what_ran_with_what():
    settings = {"aorta_docker_image": "img:1", "aorta_base_config": "c.yaml", "aorta_training_overrides": "x=1"}
    hostvars = {"a": {"aorta_launch": {"head": "b"}}, "b": {"aorta_launch": {"nproc": 8, "launch_mode": "script"}}}
    found = rr.context(settings, hostvars, {"aorta_nodes": ["a", "b", "c"]})
    assert found["nodes"] == 3 and found["gpus_per_node"] == 8 and found["launch_mode"] == "script"
    assert found["image_id"] is None and found["overrides"] == "x=1"
    assert found["settings"]["batch_size"] is None and "c.yaml was not read on the head" in found["settings"]["note"]
    # Setup stopped before the launch: nothing known of the run's shape.
    found = rr.context(settings, {}, {"aorta_nodes": ["a"]})
    assert (found["nodes"], found["gpus_per_node"], found["launch_mode"]) == (1, None, None)


def test_the_effective_config_is_what_aorta_was_given():
    settings = {"aorta_docker_image": "img:1", "aorta_base_config": "c.yaml", "aorta_training_overrides": "x.y=2"}
    read = {"path": "c.yaml", "text": "x:\n  y: 1\n", "truncated": False, "error": ""}

    def head(mode, **facts):
        prepared = {"facts": {"read": dict(read, **facts)}}
        return {"b": {"aorta_launch": {"launch_mode": mode}, "aorta_prepare": prepared}}

    groups = {"aorta_nodes": ["b"]}
    assert rr.context(settings, head("torchrun"), groups)["effective_config"] == {"x.y": 2}
    # launch_rocm.sh (script mode) passes no --override: the base config alone ran.
    assert rr.context(settings, head("script"), groups)["effective_config"] == {"x.y": 1}
    # Cut at the probe's read limit, or not read: not known, so no fingerprint of it.
    assert rr.context(settings, head("torchrun", truncated=True), groups)["effective_config"] is None
    assert rr.context(settings, head("torchrun", text=None, error="denied"), groups)["effective_config"] is None


def test_run_json_has_no_combined_traces_without_this_runs_manifest():
    assert rr.combined_traces("/r", {}) is None
    assert rr.combined_traces("/r", {"skipped": True, "files": 3}) is None
    found = rr.combined_traces("/r", {"files": 3, "missing_ranks": [5], "manifest": {"nodes_not_collected": ["b"]}})
    assert found == {"path": "/r/combined_traces", "files": 3, "missing_ranks": [5], "nodes_not_collected": ["b"]}


def test_a_setup_failure_is_recorded_with_what_is_known():
    hostvars = {
        "a": {"aorta_node_rank": 0, "aorta_vpc_ip": "v", "aorta_node_setup_task": "Probe"},
        "b": {"aorta_node_rank": 1, "aorta_vpc_ip": "w", "aorta_prepare": {"failed": True, "own": False}},
    }
    hostvars["a"]["aorta_node_setup_result"] = {"failed": True, "msg": "no docker"}
    settings = dict(SETTINGS, aorta_run_failure_message="a: Probe: no docker", aorta_run_failure_nodes=["a"])
    settings.pop("aorta_run_started_epoch")
    found = rr.record(settings, hostvars, {"aorta_nodes": ["a", "b"]}, 1796000000, diagnose=lambda *a: {"summary": "x"})
    document = found["run_json"]
    assert (document["status"], document["failed_nodes"], document["first_failure"]) == ("FAILED", ["a"], "a")
    assert document["started_epoch"] is None and document["finished_epoch"] == 1796000000
    assert document["master_addr"] is None and document["excluded"] == [] and document["combined_traces"] is None
    assert [n["state"] for n in document["nodes"]] == ["not_started", "not_started"]
    assert document["unhealthy"] == [{"name": "a", "reasons": ["a: Probe: no docker"]}]
    assert document["collection_error"] is None and document["context"]["gpus_per_node"] is None
    assert found["status"] is not document  # the status dict is the one run.json's fields came from
    assert found["lines"][:2] == [f"run {SAMPLE['run_id']}: FAILED - a: Probe: no docker", "why: x"]


def test_a_setup_failure_is_read_from_each_nodes_rescue():
    failed = {"failed": True, "msg": "docker: permission denied", "rc": 1, "stderr_lines": ["x", "y", "z", "w"]}
    hostvars = {
        "a": {"aorta_node_rank": 0, "aorta_node_setup_task": "Probe", "aorta_node_setup_result": failed},
        # Stopped only because the head failed: its probe says it was not its own failure.
        "b": {
            "aorta_node_rank": 1,
            "aorta_node_setup_task": "Probe",
            "aorta_node_setup_result": {"failed": True, "own": False, "msg": "head failed"},
        },
        # any_errors_fatal: no failed task of its own, the rescue remembers none
        "c": {"aorta_node_rank": 2, "aorta_node_setup_task": "", "aorta_node_setup_result": {}},
    }
    settings = dict(SETTINGS)
    found = rr.record(
        settings, hostvars, {"aorta_nodes": ["a", "b", "c"]}, 1796000000, diagnose=lambda *a: {"summary": "x"}
    )
    document = found["run_json"]
    assert (document["status"], document["failed_nodes"], document["first_failure"]) == ("FAILED", ["a"], "a")
    assert document["message"] == "a: Probe: docker: permission denied (rc 1): y | z | w"
    # Without the rescue's facts the same rows are judged as a run: nothing started, nothing failed.
    for name in ("a", "b", "c"):
        hostvars[name] = {"aorta_node_rank": hostvars[name]["aorta_node_rank"]}
    assert (
        rr.record(settings, hostvars, {"aorta_nodes": ["a", "b", "c"]}, 1, diagnose=lambda *a: {"summary": "x"})[
            "run_json"
        ]["message"]
        != document["message"]
    )


def test_a_setup_that_stopped_with_no_nodes_own_failure_says_a_node_is_gone():
    # The node the setup failed on was not reached (it ran no rescue); this one remembers no failure.
    hostvars = {"a": {"aorta_node_rank": 0, "aorta_node_setup_task": "", "aorta_node_setup_result": {}}}
    found = rr.record(dict(SETTINGS), hostvars, {"aorta_nodes": ["a"]}, 1, diagnose=lambda *a: {"summary": "x"})
    assert found["status"]["message"] == "setup stopped on a node that is gone"


def test_the_console_lines_say_why_only_when_it_matters():
    rows = [{"name": "a", "rank": 0, "state": "ok"}, {"name": "b", "rank": 1, "state": "failed", "exit_code": 1}]
    healthy = {"drift_lines": [], "unhealthy": [], "fabric_sweep": {"ran": False, "why": "off"}}
    done = {"status": "COMPLETED", "message": "all 2 nodes completed"}
    lines = rr.console_lines("r1", "/res", done, {"summary": "COMPLETED", "node_errors": []}, rows[:1], healthy)
    assert lines == [
        "run r1: COMPLETED - all 2 nodes completed",
        "nodes: 1 (1 ok); fabric interface: - on 1",
        "results: /res",
    ]
    lines = rr.console_lines("r1", "/res", done, {"summary": "ECC", "node_errors": [{"node": "a"}]}, rows[:1], healthy)
    assert lines[1] == "why: ECC"
    failed = {"status": "FAILED", "message": "FAILED on 1 of 2 nodes"}
    sick = {
        "drift_lines": ["preflight[drift]: WARNING kernel"],
        "unhealthy": [{"name": "b"}],
        "fabric_sweep": {"ran": False, "why": "off"},
    }
    lines = rr.console_lines("r1", "/res", failed, {"summary": "rank 2 died", "node_errors": []}, rows, sick)
    assert lines[1] == "why: rank 2 died" and lines[2].startswith("rank    1  b ") and len(lines) == 7
    assert lines[4:6] == [
        "preflight[drift]: WARNING kernel",
        "unhealthy: 1 nodes: b, listed in /res/unhealthy.txt; without them: ansible-playbook "
        "aorta.cluster.aorta_multinode -e aorta_cluster_file=/res/healthy.cluster.json (and the run's other options)",
    ]
    # -i of a raw .json works only where an ansible.cfg enables the inventory plugin: never advised.
    assert not [line for line in lines if "-i " in line]
    # --check writes nothing, and says so instead of pointing at files that are not there.
    dry = rr.console_lines("r1", "/res", failed, {"summary": "x", "node_errors": []}, rows, sick, dry_run=True)
    assert dry[5] == (
        "unhealthy: 1 nodes: b (--check: not written; a run lists them in /res/unhealthy.txt and writes "
        "healthy.cluster.json without them)"
    )
    # At 1000 nodes the line stays one line: the first names and a count, every one in unhealthy.txt.
    many = dict(sick, unhealthy=[{"name": f"n{i}"} for i in range(1, 1000)])
    big = [{"name": f"n{i}", "rank": i, "state": "not_started"} for i in range(1000)]
    (line,) = [
        x for x in rr.console_lines("r1", "/res", failed, {"summary": "x"}, big, many) if x.startswith("unhealthy")
    ]
    assert line.startswith("unhealthy: 999 nodes: n1, n2, n3, n4, n5 and 994 more, listed in /res/unhealthy.txt")
    every = rr.console_lines("r1", "/res", failed, {"summary": "x"}, rows, healthy, every_node=True)
    assert [line.split()[2] for line in every[2:4]] == ["a", "b"]


def test_a_failures_console_lines_stay_short_and_suggest_no_empty_cluster_file():
    rows = [{"name": n, "rank": r, "state": "not_started"} for r, n in enumerate(("a", "b"))]
    reason = "every node: Probe: preflight[image]: r/p:nope is not on the node and cannot be pulled: " + "E" * 4000
    failed = {"status": "FAILED", "message": reason}
    every = {
        "drift_lines": [],
        "unhealthy": [{"name": "a"}, {"name": "b"}],
        "fabric_sweep": {"ran": False, "why": "off"},
    }
    lines = rr.console_lines("r1", "/res", failed, {"summary": "FAILED: " + "w" * 500}, rows, every)
    assert lines[0].startswith("run r1: FAILED - every node: Probe: preflight[image]: r/p:nope is not on the node")
    assert lines[0].endswith("\u2026(details in run.json)") and len(lines[0]) == 300
    assert len(lines[1]) == 300 and lines[1].startswith("why: FAILED: www")
    assert "unhealthy: all 2 nodes, listed in /res/unhealthy.txt (none left to re-run on)" in lines
    assert not any("healthy.cluster.json" in line for line in lines)
    assert max(len(line) for line in lines) <= 300


def test_the_awx_stats_are_set_stats_own_shape():
    run = {"status": "TIMEOUT", "failed_nodes": ["b"]}
    launch = {"excluded_nodes": [{"name": "c", "reasons": ["sick"]}]}
    stats = rr.awx_stats("r1", "/res", run, {"summary": "TIMEOUT: rank 3"}, launch, {"manifest": {}})
    assert stats == {
        "data": {
            "aorta_run_id": "r1",
            "aorta_run_status": "TIMEOUT",
            "aorta_failed_nodes": ["b"],
            "aorta_excluded_nodes": ["c"],
            "aorta_diagnosis": "TIMEOUT: rank 3",
            "aorta_results_dir": "/res",
            "aorta_run_json": "/res/run.json",
            "aorta_manifest": "/res/combined_traces/manifest.json",
        },
        "per_host": False,
        "aggregate": True,
    }
    assert rr.awx_stats("r1", "/res", run, {}, {}, {"skipped": True})["data"]["aorta_manifest"] == ""


def test_the_health_files_keep_the_healthy_nodes_of_the_cluster_file(tmp_path):
    source = tmp_path / "cluster.json"
    nodes = {"n1": {"vpc_ip": "10.0.0.1"}, "n2": {"vpc_ip": "10.0.0.2"}}
    source.write_text(json.dumps({"username": "me", "password": "pw", "node_dict": nodes}))
    assert rr.cluster_source({"n1": {"aorta_cluster_file": str(source)}}, {"aorta_nodes": ["n1"]}) == str(source)
    assert rr.cluster_source({"n1": {"aorta_cluster_file": None}}, {"aorta_nodes": ["n1"]}) == ""
    assert rr.cluster_source({}, {}) == ""
    found = {"unhealthy": [{"name": "n2", "reasons": ["x"]}], "unhealthy_text": "n2\tx\n"}
    files = dict(rr.health_files(str(source), found))
    assert files["unhealthy.txt"] == "n2\tx\n" and list(json.loads(files["healthy.cluster.json"])["node_dict"]) == [
        "n1"
    ]
    # Every node unhealthy: no healthy.cluster.json holding no node.
    every = {"unhealthy": [{"name": "n1", "reasons": ["x"]}, {"name": "n2", "reasons": ["x"]}], "unhealthy_text": "t"}
    assert rr.health_files(str(source), every) == [("unhealthy.txt", "t")]
    # Nodes from another inventory: unhealthy.txt only, even empty.
    assert rr.health_files("", {"unhealthy": [], "unhealthy_text": ""}) == [("unhealthy.txt", "")]
    with pytest.raises(ClusterFileError):
        rr.health_files(str(tmp_path / "gone.json"), found)


def test_a_run_the_user_stopped_is_stopped_with_the_phase_and_each_nodes_steps():
    rows = [
        {"name": "a", "state": "failed", "progress": {"0": 12, "1": 11}},
        {"name": "b", "state": "failed", "progress": {"2": 12, "3": 12}},
        {"name": "c", "state": "not_started", "progress": {}},
    ]
    stop = {"at": 1.0, "signal": "SIGINT", "reason": "interrupted on the controller at 10:00 (SIGINT)"}
    found = rr.stopped_status(dict(stop, phase="while training"), rows)
    assert found["status"] == "STOPPED" and found["failed_nodes"] == [] and found["first_failure"] is None
    assert found["message"] == (
        "STOPPED by the user while training: interrupted on the controller at 10:00 (SIGINT); steps reached 11 to 12"
    )
    assert found["stopped"] == {**stop, "phase": "while training", "steps": {"a": 11, "b": 12}}


def test_a_run_stopped_by_aorta_cluster_stop_from_another_controller_is_stopped_not_failed():
    """The watching controller had no Ctrl-C: its nodes' supervisors say the head stopped them for
    aorta.cluster.stop (each exits 1 under SIGTERM); that is the operator's stop, not their failure."""
    reason = "stopped by aorta.cluster.stop from me@ctl2 (ansible-playbook pid 9) at 2026-12-08 01:23:03 UTC"
    stop = {"by": "head", "kind": "stopped", "node": "controller", "reason": reason}
    rows = [
        {"name": "a", "state": "failed", "exit_code": 1, "progress": {"0": 4}, "cluster_stop": stop},
        {"name": "b", "state": "failed", "exit_code": 1, "progress": {"1": 3}, "cluster_stop": stop},
    ]
    found = rr.stop_from_outside(rows)
    assert found == {"reason": reason, "phase": "while training", "signal": None, "at": None}
    assert (
        rr.stopped_status(found, rows)["message"]
        == f"STOPPED by the user while training: {reason}; steps reached 3 to 4"
    )
    # Any other stop of the head's (a node gone, the orphan grace, a slow fabric) is not the operator's.
    other = dict(stop, reason="stopped from the controller: no controller watched for 600 s")
    assert rr.stop_from_outside([dict(rows[0], cluster_stop=other)]) is None
    assert rr.stop_from_outside([dict(rows[0], cluster_stop=dict(stop, kind="fabric"))]) is None


def failed_run_vars(prepared: dict, setup_result: dict, results_dir: str = "") -> dict:
    """The hostvars of a run whose worker failed its own preflight (the head passed): as the
    rescue leaves them (its failed task and result on the worker)."""
    return {
        "head-01": {"aorta_node_rank": 0, "aorta_vpc_ip": "192.168.20.1", "aorta_prepare": {"derived": {}}},
        "gpu-node-07": {
            "aorta_node_rank": 1,
            "aorta_vpc_ip": "192.168.20.7",
            "aorta_prepare": prepared,
            "aorta_node_setup_task": "Probe every node, hold it for this run and prove the fabric",
            "aorta_node_setup_result": setup_result,
        },
        "localhost": {"aorta_results_dir_resolved": results_dir},
    }


def test_run_json_keeps_a_shortened_failures_every_detail(failed_preflight, results_with_logs):
    full = failed_preflight()
    results = str(results_with_logs)
    short = nr.shorten_failure(copy.deepcopy(full), results, "gpu-node-07", "preflight", ("own", "reached"))
    assert "failures" not in short and "derived" not in short
    groups = {"aorta_nodes": ["head-01", "gpu-node-07"]}

    def document(prepared, setup_result):
        hostvars = failed_run_vars(prepared, setup_result, results)
        values = nr.host_values(hostvars, nr.nodes_of(groups), nr.NODE_VARS)
        values["localhost"] = hostvars["localhost"]
        found = rr.record(dict(SETTINGS), values, groups, 1796000100, diagnose=lambda *a: {"summary": "x"})
        return found["run_json"]

    before = document(full, full)
    after = document(short, dict(short, _ansible_no_log=False))
    assert after == before
    assert after["unhealthy"] == [{"name": "gpu-node-07", "reasons": failed_preflight()["failures"]}]
    assert after["failed_nodes"] == ["gpu-node-07"]
    task = "Probe every node, hold it for this run and prove the fabric"
    assert after["message"] == f"gpu-node-07: {task}: {full['msg']}"
    assert after["nodes"][1]["fabric_if"] == "ens51np0" and after["nodes"][1]["health"]["kernel"] == 3
    # The file gone: what the short result holds, not an error.
    (results_with_logs / short["details"]).unlink()
    gone = document(short, short)
    assert gone["unhealthy"] == [{"name": "gpu-node-07", "reasons": [short["msg"]]}]


def test_link_errors_that_grew_are_a_finding_with_one_console_line_whatever_the_node_count():
    rows = [
        {"name": "n0", "link": {"interface": "eth1", "grew": {}}},
        {"name": "n1", "link": {"interface": "eth1", "grew": {"rx_errors": 12, "tx_errors": 0}}},
        {"name": "n2", "link": None},
    ]
    assert rr.link_errors(rows) == [{"node": "n1", "interface": "eth1", "grew": {"rx_errors": 12}}]
    assert rr.link_errors_line(rr.link_errors(rows)) == [
        "fabric link errors grew during the run on 1 node: n1 (rx_errors +12) (run.json)"
    ]
    many = [{"name": f"n{i}", "link": {"interface": "eth1", "grew": {"tx_errors": i + 1}}} for i in range(1000)]
    (line,) = rr.link_errors_line(rr.link_errors(many))
    assert line.endswith("n2 (tx_errors +3) and 997 more (run.json)") and len(line) < 300
    assert rr.link_errors_line([]) == []


def test_link_errors_below_aorta_link_errors_min_are_no_finding_but_stay_in_the_nodes_row():
    """A counter that moves by one on a healthy link is noise: the finding (which fails the verdict)
    starts at aorta_link_errors_min; the row keeps what grew."""
    rows = [
        {"name": "n0", "link": {"interface": "eth1", "grew": {"rx_errors": 1}}},
        {"name": "n1", "link": {"interface": "eth1", "grew": {"rx_errors": 10, "tx_errors": 9}}},
    ]
    assert rr.link_errors(rows, 10) == [{"node": "n1", "interface": "eth1", "grew": {"rx_errors": 10}}]
    assert rr.link_errors(rows, 11) == []
    assert rows[0]["link"]["grew"] == {"rx_errors": 1}


def sweep_rows(min_gbps=None):
    """Three rows as node_end records them: the head's sweep carries the cluster's judgement."""
    cluster = {
        "tool": "tcp",
        "median_gbps": 3.8,
        "min_gbps": min_gbps,
        "slow": [{"node": "n2", "rank": 2, "direction": "send", "send_gbps": 0.19, "recv_gbps": 3.7, "ratio": 0.05}],
    }
    own = {"tool": "tcp", "rounds": [], "send_gbps": 3.8, "recv_gbps": 3.7, "ratio": 1.0, "slow": False}
    return [
        {"name": "n0", "fabric_sweep": dict(own, cluster=cluster)},
        {"name": "n1", "fabric_sweep": dict(own)},
        {"name": "n2", "fabric_sweep": dict(own, send_gbps=0.19, ratio=0.05, slow=True)},
    ]


def test_the_heads_sweep_judgement_is_run_jsons_fabric_sweep_and_each_row_keeps_only_its_own():
    rows = sweep_rows()
    sweep = rr.fabric_sweep(rows)
    assert sweep["ran"] is True and sweep["slow"][0]["node"] == "n2" and sweep["median_gbps"] == 3.8
    assert "cluster" in rows[0]["fabric_sweep"]  # reading does not change the rows
    assert "cluster" not in rr.own_sweep(rows[0])["fabric_sweep"]
    assert rr.own_sweep(rows[1]) is rows[1]
    (line,) = rr.fabric_sweep_line(sweep)
    assert line == (
        "fabric sweep (tcp): slow link on n2 (send: 0.19/3.7 Gbit/s sent/received, 0.05x), against a median of "
        "3.8 Gbit/s (run.json's fabric_sweep)"
    )


def test_no_sweep_says_why_and_prints_nothing():
    assert rr.fabric_sweep([{"name": "n0", "fabric_sweep": None}])["ran"] is False
    assert rr.fabric_sweep_line({"ran": False, "why": "off"}) == []
    head_lost = rr.fabric_sweep([{"name": "n0"}, {"name": "n1", "fabric_sweep": {"tool": "tcp"}}])
    assert head_lost == {"ran": False, "why": "the head's judgement of the sweep is not in its status"}


def test_a_node_below_aorta_fabric_min_gbps_is_unhealthy_and_none_without_a_minimum():
    assert rr.below_min_gbps(sweep_rows(), rr.fabric_sweep(sweep_rows())) == []
    rows = sweep_rows(min_gbps=1.0)
    assert rr.below_min_gbps(rows, rr.fabric_sweep(rows)) == [
        {"name": "n2", "reasons": ["fabric sweep: sends at 0.19 Gbit/s at best, below aorta_fabric_min_gbps 1"]}
    ]
