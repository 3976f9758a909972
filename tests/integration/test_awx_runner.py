# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbook driven the way AWX drives it: ansible-runner, a private data directory (env/extravars
with the survey's answers as AWX types them, env/ssh_key from a Machine credential, the user on the
command line), the project as working directory, and an inventory AWX generated from an inventory
source. Assertions are on what AWX reads back: the runner's status, its artifacts, the job events
and the stats set_stats hands over."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import ansible_runner
import pytest
import standin  # tests/standin, put on sys.path by conftest
import yaml

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import HEARTBEAT_S, stop_bound_s

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.standin

SURVEY = json.loads((REPO / "examples" / "awx" / "survey_spec.json").read_text())
TEMPLATE = json.loads((REPO / "examples" / "awx" / "job_template.json").read_text())


def standin_vars() -> dict:
    """What a real cluster's inventory or job template would carry, and the stand-in changes.
    The host keys stay checked; IdentitiesOnly goes, since the key is in ssh-agent, as in AWX."""
    values = yaml.safe_load(standin.OUT.joinpath("vars.yml").read_text())
    values["ansible_ssh_common_args"] = (
        f"-o UserKnownHostsFile={standin.OUT / 'known_hosts'} -o StrictHostKeyChecking=yes"
    )
    return values


def survey_answers(**answers) -> dict:
    """Extra variables as AWX builds them from a survey: every question's default, then the
    answers given; integer questions arrive as int, the rest as text. Unanswered optional
    questions are left out."""
    values = {}
    for question in SURVEY["spec"]:
        value = answers.get(question["variable"], question.get("default", ""))
        if value == "" and not question["required"]:
            continue
        values[question["variable"]] = int(value) if question["type"] == "integer" else str(value)
    return values


def private_data_dir(tmp_path, inventory_script: str, extravars: dict):
    pdd = tmp_path / "pdd"
    (pdd / "env").mkdir(parents=True)
    (pdd / "inventory").mkdir()
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    # A Machine credential: the key goes to ssh-agent (never to disk in the job), the user to -u.
    (pdd / "env" / "ssh_key").write_text((standin.OUT / "id_ed25519").read_text())
    (pdd / "env" / "cmdline").write_text("-u root")
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({"PATH": f"{BIN}:{os.environ['PATH']}"}))
    script = pdd / "inventory" / "hosts"
    script.write_text(inventory_script)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return pdd


def awx_inventory_from_source(cluster_json) -> str:
    """What an AWX inventory update stores and a job then reads: `ansible-inventory --list --export`
    of the source file inventories/awx/credential_file.yml, the cluster file injected by the
    'Aorta cluster file' credential as AORTA_CLUSTER_FILE; served to the job as an inventory script."""
    exported = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", "inventories/awx/credential_file.yml", "--list", "--export"],
        cwd=REPO,
        env=dict(os.environ, AORTA_CLUSTER_FILE=str(cluster_json), ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return f"#!/bin/sh\ncat <<'AWX_INVENTORY'\n{exported}\nAWX_INVENTORY\n"


def stats(events: list[dict]) -> dict:
    final = [e for e in events if e.get("event") == "playbook_on_stats"]
    assert final, "no playbook_on_stats event"
    return final[-1]["event_data"].get("artifact_data", {})


def test_job_template_run_through_ansible_runner(standin_cluster, tmp_path):
    site = standin_vars()
    extravars = {
        **site,
        **yaml.safe_load(TEMPLATE["extra_vars"]),
        "aorta_results_root": str(tmp_path / "aorta-results"),
        **survey_answers(
            aorta_path=site["aorta_path"],
            aorta_docker_image=site["aorta_docker_image"],
            aorta_timeout_seconds=300,
            aorta_gpus_per_node=2,
            aorta_training_overrides="standin.echo_overrides=true\ntraining.max_steps=5",
            aorta_expected_results="max_avg_iteration_ms=600000 min_compute_ratio=0.0",
        ),
    }
    assert isinstance(extravars["aorta_timeout_seconds"], int)
    assert isinstance(extravars["aorta_fail_on_threshold"], str)  # multiplechoice answers are text
    pdd = private_data_dir(tmp_path, awx_inventory_from_source(standin_cluster.cluster_json), extravars)

    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        project_dir=str(REPO),
        playbook=TEMPLATE["playbook"],
        ident="job-1",
        quiet=True,
        timeout=900,
    )
    stdout = runner.stdout.read()
    assert runner.status == "successful" and runner.rc == 0, stdout[-3000:]

    # What AWX keeps of a job: the artifacts directory of this ident.
    artifacts = pdd / "artifacts" / "job-1"
    assert (artifacts / "rc").read_text().strip() == "0"
    assert (artifacts / "status").read_text().strip() == "successful"
    assert list((artifacts / "job_events").glob("*.json"))

    events = list(runner.events)  # read from the artifacts' job_events once
    data = stats(events)
    assert data["aorta_run_status"] == "COMPLETED"
    assert data["aorta_failed_nodes"] == []
    assert data["aorta_report_status"] == "completed"
    assert data["aorta_thresholds_passed"] is True
    assert float(data["aorta_avg_iteration_time_ms"]) > 0
    # Which ranks straggle on two shared cores is noise; that they are named by rank is not.
    assert set(data["aorta_straggler_ranks"]) <= set(range(2 * len(standin_cluster.nodes)))
    run = json.loads(Path(data["aorta_run_json"]).read_text())
    assert [n["state"] for n in run["nodes"]] == ["ok"] * len(standin_cluster.nodes)
    manifest = json.loads(Path(data["aorta_manifest"]).read_text())
    assert manifest["missing_ranks"] == []
    assert os.path.isfile(data["aorta_report"]) and os.path.isfile(data["aorta_report_html"])
    # The verdict, junit.xml and the results root's history page, for a workflow's next node or CI.
    assert data["aorta_verdict"] == "PASS" and data["aorta_verdict_reasons"] == []
    assert data["aorta_junit"] == str(Path(data["aorta_results_dir"]) / "junit.xml")
    assert data["aorta_history"] == str(Path(data["aorta_results_dir"]).parent / "index.html")
    assert os.path.isfile(data["aorta_junit"]) and os.path.isfile(data["aorta_history"])

    # The textarea answer reached the workload as one --override group.
    head = standin_cluster.nodes[0]["mgmt_ip"]
    head_log = (Path(data["aorta_results_dir"]) / "logs" / f"{head}.log").read_text()
    assert 'overrides ["training.output_dir=' in head_log and '"training.max_steps=5"' in head_log

    # Progress while torchrun runs: one summary line per poll for the whole run, and no
    # "FAILED - RETRYING" lines that read like failures in a healthy job.
    assert not [e for e in events if e.get("event") == "runner_retry"]
    assert re.search(rf"^running \d+/{len(standin_cluster.nodes)} nodes", stdout, re.M), "no progress lines"
    # The Machine credential's key never reaches the job output or its events.
    key_body = (standin.OUT / "id_ed25519").read_text().splitlines()[1]
    assert key_body not in stdout
    assert not any(key_body in json.dumps(e) for e in events)


def test_survey_cluster_file_route_in_check_mode(standin_cluster, tmp_path):
    """The job's inventory holds no nodes; the survey names the cluster file in the project."""
    relative = os.path.relpath(standin_cluster.cluster_json, REPO)
    site = standin_vars()
    extravars = {
        **site,
        **yaml.safe_load(TEMPLATE["extra_vars"]),
        "aorta_results_root": str(tmp_path / "aorta-results"),
        # Preflight checks the image in --check too: the stand-in's, as the first job's survey gives it.
        **survey_answers(
            aorta_cluster_file=relative, aorta_path=site["aorta_path"], aorta_docker_image=site["aorta_docker_image"]
        ),
    }
    pdd = private_data_dir(tmp_path, '#!/bin/sh\necho \'{"_meta": {"hostvars": {}}}\'\n', extravars)
    (pdd / "env" / "cmdline").write_text("-u root --check")
    runner = ansible_runner.run(
        private_data_dir=str(pdd), project_dir=str(REPO), playbook=TEMPLATE["playbook"], ident="check", quiet=True
    )
    stdout = runner.stdout.read()
    assert runner.rc == 0, stdout[-3000:]
    # Each node's launch event holds its row (what --check prints): rendezvous, argv, environment.
    shown = [
        e["event_data"]["res"]["plan"]
        for e in runner.events
        if e.get("event") == "runner_on_ok" and str(e["event_data"].get("task", "")) == "Launch on every node at once"
    ]
    ranks = sorted(int(m["node"].split("rank ", 1)[1].split(",")[0]) for m in shown)
    assert ranks == list(range(len(standin_cluster.nodes)))
    assert standin_cluster.containers_left() == []


def controller_processes(marker: str) -> list[str]:
    """Processes on this machine whose command line holds ``marker`` (the job's private data dir)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_a_cancelled_job_is_stopped_by_the_head_after_the_orphan_grace_and_leaves_no_watcher(standin_cluster, tmp_path):
    """AWX's cancel (ansible-runner sends SIGKILL to the job's process group: nothing can trap it).
    With aorta_orphan_grace_seconds 30 (15 of the watch's polls) the head stops every node once no
    watch has polled for that long; the head watch's worker, which leads a process group of its own,
    does not poll on. (60 cost CI 30 s more and proved nothing 30 does not.)"""
    grace, orphan = 10, 30
    run_id = "cancel-" + uuid.uuid4().hex[:6]
    extravars = {
        **standin_vars(),
        "aorta_results_root": str(tmp_path / "aorta-results"),
        "aorta_run_id": run_id,
        "aorta_timeout_seconds": 900,
        "aorta_kill_grace_seconds": grace,
        "aorta_orphan_grace_seconds": orphan,
        "aorta_training_overrides": {"training.max_steps": 1000000},
    }
    pdd = private_data_dir(tmp_path, awx_inventory_from_source(standin_cluster.cluster_json), extravars)
    cancel = threading.Event()
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(pdd),
        project_dir=str(REPO),
        playbook=TEMPLATE["playbook"],
        ident="job-cancel",
        quiet=True,
        cancel_callback=cancel.is_set,
    )
    try:
        for _attempt in range(300):
            statuses = [standin_cluster.node_status(i, run_id) for i in range(len(standin_cluster.nodes))]
            if all(s and s["state"] == "running" and min(s["progress"].values() or [0]) > 0 for s in statuses):
                break
            assert thread.is_alive(), runner.stdout.read()[-3000:]
            time.sleep(1)
        time.sleep(5)  # the head's watch is polling
    finally:
        cancel.set()
    cancelled = time.monotonic()
    thread.join(60)
    assert runner.status == "canceled", runner.status
    # The watch's worker sees it was left at its next poll (aorta_poll_seconds 2 here) and ends.
    for _attempt in range(30):
        left = controller_processes(str(pdd))
        if not left:
            break
        time.sleep(1)
    assert left == [], left
    bound = orphan + stop_bound_s(grace, 0) + 2 * HEARTBEAT_S + 15
    for _attempt in range(int(bound)):
        there = standin_cluster.containers_of(run_id) + standin_cluster.workload_processes()
        if not there:
            break
        time.sleep(1)
    gone_after = time.monotonic() - cancelled
    assert there == [] and gone_after < bound, (there, gone_after, bound)
    assert gone_after > orphan - 10, gone_after  # the head waited for the grace, not the deadline
    for index in range(len(standin_cluster.nodes)):
        # The container goes at the supervisor's cleanup; its status says finished after the kernel
        # log scan and its final report (the head's after the others'), a few seconds later.
        for _attempt in range(60):
            status = standin_cluster.node_status(index, run_id)
            if status and status["finished"]:
                break
            time.sleep(1)
        assert status["finished"] and "no controller has watched the run" in status["reason"], status
