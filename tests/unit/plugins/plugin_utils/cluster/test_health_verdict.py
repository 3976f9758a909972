# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight's health judgement and the fingerprints' drift (pure functions)."""

from __future__ import annotations

import pathlib
import re

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _health, _kernel_log
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _health_verdict

EXPECT = {"require_gpu": True, "gpus_needed": 8, "slow_s": 15, "step_timeout": 30, "collect": True}


def healthy(**changes):
    facts = {
        "tool": "amd-smi",
        "steps": [{"name": "amd-smi list", "seconds": 0.8, "timed_out": False, "error": ""}],
        "count": {"logical": 8, "physical": 8, "partitioned": False, "error": ""},
        "processes": [{"pid": 7, "name": "rdcd", "user": "root", "allowed": True}],
        "ecc": {"correctable": 12, "uncorrectable": 0, "gpus": []},
        "kernel": {"source": "journalctl", "error": "", "lines": [], "since_source": "previous run"},
        "rsync": True,
    }
    facts.update(changes)
    return facts


def test_a_healthy_node_passes_correctable_errors_and_allowed_agents_included():
    assert _health_verdict.judge("n0", healthy(), EXPECT) == []
    assert _health_verdict.judge("n0", None, EXPECT) == []


def test_a_leaked_process_is_named_by_pid_name_and_user():
    leaked = healthy(processes=[{"pid": 4242, "name": "python3", "user": "alice", "allowed": False}])
    (line,) = _health_verdict.judge("n1", leaked, EXPECT)
    assert line.startswith("preflight[health]: n1: 1 process(es) already hold a GPU: pid 4242 python3 (user alice)")
    assert "aorta_gpu_process_allow" in line


def test_a_hung_tool_is_one_line_naming_the_step_and_its_timeout():
    steps = [
        {"name": "amd-smi list", "seconds": 30.0, "timed_out": True, "error": "no answer within 30 s"},
        {"name": "amd-smi static", "seconds": 0, "timed_out": False, "skipped": True, "error": "not run"},
    ]
    hung = healthy(steps=steps, count={"logical": 0, "physical": 0})
    (line,) = _health_verdict.judge("n2", hung, EXPECT)
    assert line == (
        "preflight[health]: n2: amd-smi list gave no answer within 30 s (the driver may be wedged; "
        "later GPU tool steps not run)"
    )


def test_a_slow_answer_fails_beyond_the_bound():
    slow = healthy(steps=[{"name": "amd-smi process", "seconds": 21.5, "timed_out": False, "error": ""}])
    (line,) = _health_verdict.judge("n2", slow, EXPECT)
    assert "amd-smi process took 21.5 s, over the 15 s bound" in line and "wedged" in line


def test_gpu_count_and_partition_modes():
    few = healthy(count={"logical": 6, "physical": 6, "partitioned": False})
    assert _health_verdict.judge("n3", few, EXPECT) == [
        "preflight[gpu]: n3: 6 GPUs seen by amd-smi, 8 needed (aorta_gpus_per_node)"
    ]
    cpx = healthy(count={"logical": 64, "physical": 8, "partitioned": True})
    (line,) = _health_verdict.judge("n3", cpx, EXPECT)
    assert "lists 64 GPUs on 8 devices" in line and "set aorta_gpus_per_node to 64" in line
    assert _health_verdict.judge("n3", cpx, dict(EXPECT, gpus_needed=64)) == []
    assert _health_verdict.judge("n3", few, dict(EXPECT, require_gpu=False)) == []


def test_uncorrectable_ecc_fails_correctable_does_not():
    bad = healthy(ecc={"correctable": 0, "uncorrectable": 2, "gpus": [{"gpu": 3, "uncorrectable": 2}]})
    assert _health_verdict.judge("n4", bad, EXPECT) == ["preflight[health]: n4: 2 uncorrectable ECC error(s) on GPU 3"]


def test_kernel_errors_fail_by_kind_and_an_unreadable_log_does_not():
    lines = [
        {"at": 1.0, "kind": "oom", "line": "Out of memory: Killed process 12"},
        {"at": 2.0, "kind": "xgmi", "line": "amdgpu 0000:05:00.0: xgmi link down"},
    ]
    (line,) = _health_verdict.judge("n5", healthy(kernel={"lines": lines, "since_source": "previous run"}), EXPECT)
    assert "1 GPU/NIC error(s) in the kernel log since previous run (xgmi)" in line
    only_oom = healthy(kernel={"lines": lines[:1]})
    assert _health_verdict.judge("n5", only_oom, EXPECT) == []
    unreadable = healthy(kernel={"source": None, "error": "kernel log not readable (dmesg: EPERM)", "lines": []})
    assert _health_verdict.judge("n5", unreadable, EXPECT) == []
    assert _health_verdict.summary(unreadable)["kernel"] == "unknown"


def test_a_node_without_rsync_passes_even_when_traces_are_collected():
    # node_end streams the traces over the node's own connection: nothing on the node runs rsync.
    no_rsync = healthy(rsync=False)
    assert _health_verdict.judge("n6", no_rsync, EXPECT) == []
    assert _health_verdict.judge("n6", no_rsync, dict(EXPECT, collect=False)) == []
    without_key = healthy()
    del without_key["rsync"]
    assert _health_verdict.judge("n6", without_key, EXPECT) == []


def test_summary_keeps_counts_not_output():
    kept = _health_verdict.summary(healthy())
    assert kept["gpus"] == 8 and kept["ecc_correctable"] == 12 and kept["kernel"] == 0
    assert kept["processes"] == [{"pid": 7, "name": "rdcd", "user": "root", "allowed": True}]


def fp(**changes):
    base = {
        "kernel": "6.8.0-45",
        "rocm": "6.2.4",
        "amdgpu": "6.8.5",
        "gpu_model": "MI300X",
        "docker": "27.1",
        "image_id": "sha256:1",
    }
    base.update(changes)
    return base


def test_drift_names_the_minority_per_field_and_skips_what_a_node_could_not_read():
    prints = {f"n{i}": fp() for i in range(4)}
    prints["n3"] = fp(amdgpu="6.7.0")
    prints["n2"] = fp(rocm=None)
    (found,) = _health_verdict.drift(prints)
    assert found["field"] == "amdgpu" and found["majority"] == "6.8.5" and found["nodes"] == [("n3", "6.7.0")]
    assert _health_verdict.drift_lines([found]) == [
        "preflight[drift]: WARNING amdgpu driver: 1 of 4 nodes differ from 6.8.5: n3 (6.7.0)"
    ]


def test_drift_at_1000_nodes_is_one_line_per_field():
    prints = {
        f"node{i:04d}": fp(kernel="6.8.0-49" if i % 100 == 7 else "6.8.0-45", docker="26.0" if i < 5 else "27.1")
        for i in range(1000)
    }
    lines = _health_verdict.drift_lines(_health_verdict.drift(prints))
    assert len(lines) == 2
    assert lines[0] == (
        "preflight[drift]: WARNING kernel: 10 of 1000 nodes differ from 6.8.0-45: node0007 (6.8.0-49), "
        "node0107 (6.8.0-49), node0207 (6.8.0-49) and 7 more"
    )
    assert "docker: 5 of 1000 nodes differ from 27.1" in lines[1]


def test_no_drift_on_identical_or_single_nodes():
    assert _health_verdict.drift({"n0": fp(), "n1": fp()}) == []
    assert _health_verdict.drift({"n0": fp()}) == []


def test_health_record_names_the_nodes_whose_own_preflight_failed():
    rows = [{"name": f"n{i}", "fingerprint": fp(amdgpu="6.7.0" if i == 3 else "6.8.5")} for i in range(4)]
    prepared = [
        {"failed": False},
        {"failed": True, "own": True, "failures": ["preflight[health]: n1: leaked", "preflight[disk]: n1: full"]},
        {"failed": True, "own": True, "reached": False, "msg": "preflight[ssh]: unreachable: n2: timed out"},
        {},
    ]
    messages = ["", "n1: Probe: ...", "n2: Probe: ...", ""]
    record = _health_verdict.health_record(rows, prepared, messages, [False, True, True, False])
    assert [u["name"] for u in record["unhealthy"]] == ["n1", "n2"]
    assert record["unhealthy_text"] == (
        "n1\tpreflight[health]: n1: leaked\nn1\tpreflight[disk]: n1: full\n"
        "n2\tpreflight[ssh]: unreachable: n2: timed out\n"
    )
    assert record["drift_lines"] == [
        "preflight[drift]: WARNING amdgpu driver: 1 of 4 nodes differ from 6.8.5: n3 (6.7.0)"
    ]


def test_a_worker_not_held_because_the_head_failed_is_not_unhealthy():
    rows = [{"name": "n0"}, {"name": "n1"}]
    prepared = [
        {"failed": True, "own": True, "failures": ["preflight[health]: n0: ecc"]},
        {"failed": True, "own": False},
    ]
    record = _health_verdict.health_record(rows, prepared, ["n0: x", ""], [True, False])
    assert [u["name"] for u in record["unhealthy"]] == ["n0"] and record["drift"] == []


def test_a_node_excluded_by_preflight_is_unhealthy_unreachable_or_not():
    """aorta_exclude_unhealthy turns a failed preflight into ``excluded`` (not failed): the run went on
    without it, and unhealthy.txt, run.json and healthy.cluster.json must still name it."""
    rows = [{"name": "n0"}, {"name": "n1"}, {"name": "n2"}]
    prepared = [
        {"changed": False},
        {"failed": False, "excluded": True, "own": True, "reached": False, "msg": "preflight[ssh]: unreachable: n1"},
        {"failed": False, "excluded": True, "own": True, "failures": ["preflight[disk]: n2: full"]},
    ]
    record = _health_verdict.health_record(rows, prepared, ["", "", ""], [False, False, False])
    assert record["unhealthy"] == [
        {"name": "n1", "reasons": ["preflight[ssh]: unreachable: n1"]},
        {"name": "n2", "reasons": ["preflight[disk]: n2: full"]},
    ]


def test_unhealthy_txt_keeps_one_line_per_reason_whatever_the_reason_holds():
    """ssh's error spans lines (``...banner exchange\r\nConnection to ... timed out``): one line each."""
    found = [{"name": "n1", "reasons": ["preflight[ssh]: unreachable: n1: timed out\r\nConnection to n1\tport 22"]}]
    assert (
        _health_verdict.unhealthy_text(found)
        == "n1\tpreflight[ssh]: unreachable: n1: timed out Connection to n1 port 22\n"
    )


def test_a_tie_has_no_majority_and_names_every_node():
    (found,) = _health_verdict.drift({"n0": fp(), "n3": fp(amdgpu="6.7.0")})
    assert found["majority"] is None
    assert _health_verdict.drift_lines([found]) == [
        "preflight[drift]: WARNING amdgpu driver: 2 of 2 nodes differ, no majority: n0 (6.8.5), n3 (6.7.0)"
    ]


def test_docs_health_md_lists_what_the_code_allows_and_fails():
    text = (pathlib.Path(__file__).resolve().parents[5] / "docs" / "health.md").read_text()
    allowed = text.split("Processes allowed to hold a GPU", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"`([^`]+)`", allowed)) == sorted([*_health.DEFAULT_ALLOW, "aorta_gpu_process_allow"])
    failing = text.split("Kernel-log kinds that fail a node", 1)[1].split("\n\n", 1)[0]
    named = re.findall(r"`([^`]+)`", failing)
    assert set(named) >= set(_health_verdict.FAILING_KERNEL_KINDS)
    assert set(named) - set(_health_verdict.FAILING_KERNEL_KINDS) == {"page fault", "hung task", "oom"}
    assert set(named) == {name for name, _pattern in _kernel_log.PATTERNS}
