# SPDX-License-Identifier: GPL-3.0-or-later
"""run_record in-process with a fake hostvars, and once through ansible-playbook: run.json, the health
files (0600, never in the result), the end lines, and the AWX stats ansible-playbook takes from the
action's own result (no set_stats task)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from ansible_collections.aorta.cluster.plugins.action.run_record import ActionModule, write_text

REPO = Path(__file__).resolve().parents[4]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
PASSWORD = "ssh-pass-do-not-log"


def action(check_mode=False):
    task = SimpleNamespace(args={}, async_val=0, check_mode=check_mode, action="aorta.cluster.run_record")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    return ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)


def cluster_file(tmp_path):
    path = tmp_path / "cluster.json"
    nodes = {name: {"vpc_ip": f"10.1.0.{i}"} for i, name in enumerate(("n0", "n1", "n2"))}
    path.write_text(json.dumps({"username": "me", "password": PASSWORD, "node_dict": nodes}))
    return str(path)


def task_vars(tmp_path, source=""):
    """Three nodes, the first excluded by preflight (unhealthy); the launch's head is n1."""
    launch = {"head": "n1", "nnodes": 2, "nproc": 2, "launch_mode": "torchrun", "master_addr": "10.1.0.1"}
    launch |= {"master_port": 29600, "excluded_nodes": [{"name": "n0", "reasons": ["4 GPUs"]}]}
    hostvars = {}
    for rank, name in enumerate(("n0", "n1", "n2")):
        end = {"state": "excluded" if rank == 0 else "ok", "exit_code": None if rank == 0 else 0}
        hostvars[name] = {
            "aorta_node_rank": rank,
            "aorta_vpc_ip": f"10.1.0.{rank}",
            "aorta_cluster_file": source,
            "aorta_prepare": {"derived": {"fabric_if": "eth1", "record": {"clock_offset_s": 0.5}}},
            "aorta_launch": dict(launch, rank=rank - 1) if rank else {"head": "n1", "excluded": True},
            "aorta_end": {"node_result": end, "collect": {"rank": rank, "name": name}},
        }
    hostvars["n0"]["aorta_prepare"] |= {"failed": True, "failures": ["preflight[gpu]: n0: 4 GPUs seen"]}
    hostvars["localhost"] = {
        "aorta_combined": {"files": 8, "missing_ranks": [], "manifest": {"nodes_not_collected": []}}
    }
    return {
        "groups": {"aorta_nodes": ["n0", "n1", "n2"]},
        "hostvars": hostvars,
        "aorta_run_id_resolved": "r1",
        "aorta_results_dir_resolved": str(tmp_path / "results"),
        "aorta_docker_image": "img:1",
        "aorta_base_config": "config/distributed.yaml",
        "aorta_training_overrides": {},
        "aorta_run_started_epoch": 1796000000,
    }


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_record_and_its_health_files_are_written_and_nothing_secret_returned(tmp_path):
    out = action().run(task_vars=task_vars(tmp_path, cluster_file(tmp_path)))
    assert not out.get("failed"), out
    results = tmp_path / "results"
    run = json.loads((results / "run.json").read_text())
    # run_outcome, the run's last task, adds the verdict.
    assert set(run) | {"verdict"} == set(SAMPLE)
    assert set(run["nodes"][1]) >= {"name", "rank", "state", "fingerprint", "log"}
    assert run["status"] == "COMPLETED" and run["excluded"] == [{"name": "n0", "reasons": ["4 GPUs"]}]
    assert run["context"]["nodes"] == 2 and run["context"]["gpus_per_node"] == 2 and run["started_epoch"] == 1796000000
    assert run["combined_traces"]["files"] == 8 and run["collection_error"] is None
    assert mode(results / "run.json") == 0o644
    assert (results / "unhealthy.txt").read_text() == "n0\tpreflight[gpu]: n0: 4 GPUs seen\n"
    healthy = (results / "healthy.cluster.json").read_text()
    assert list(json.loads(healthy)["node_dict"]) == ["n1", "n2"] and PASSWORD in healthy
    assert mode(results / "unhealthy.txt") == mode(results / "healthy.cluster.json") == 0o600
    assert out["files"] == ["unhealthy.txt", "healthy.cluster.json"]
    assert PASSWORD not in json.dumps(out)
    assert out["status"] == {
        "status": "COMPLETED",
        "failed_nodes": [],
        "first_failure": None,
        "message": run["message"],
    }
    assert out["diagnosis"] == run["diagnosis"] and out["run_json"] == str(results / "run.json")
    assert out["lines"][0] == out["msg"] == "run r1: COMPLETED - all 2 nodes completed; 1 excluded by preflight: n0"
    assert out["lines"][-2:] == [
        f"unhealthy: 1 nodes: n0, listed in {results}/unhealthy.txt; without them: ansible-playbook "
        f"aorta.cluster.aorta_multinode -e aorta_cluster_file={results}/healthy.cluster.json "
        "(and the run's other options)",
        f"results: {results}",
    ]
    assert out["ansible_stats"]["data"]["aorta_excluded_nodes"] == ["n0"]
    assert (out["ansible_stats"]["per_host"], out["ansible_stats"]["aggregate"]) == (False, True)
    # run.json as to_nice_json wrote it: sorted keys, four spaces, no newline at the end.
    text = (results / "run.json").read_text()
    assert text == json.dumps(run, indent=4, sort_keys=True, separators=(",", ": "))


def test_check_mode_returns_the_record_and_writes_nothing(tmp_path):
    out = action(check_mode=True).run(task_vars=task_vars(tmp_path))
    assert not out.get("failed") and out["status"]["status"] == "COMPLETED" and out["changed"] is False
    assert not (tmp_path / "results").exists() and "files" not in out


def test_every_node_has_its_line_with_v(tmp_path):
    found = task_vars(tmp_path)
    quiet = action(check_mode=True).run(task_vars=found)["lines"]
    verbose = action(check_mode=True).run(task_vars=dict(found, ansible_verbosity=1))["lines"]
    assert len(verbose) == len(quiet) + 2  # n1 and n2 were ok: shown only with -v
    assert [line.split()[2] for line in verbose if line.startswith("rank")] == ["n0", "n1", "n2"]


def test_a_missing_setting_is_named(tmp_path):
    found = task_vars(tmp_path)
    del found["aorta_results_dir_resolved"], found["aorta_docker_image"]
    out = action().run(task_vars=found)
    assert out["failed"] and out["msg"].startswith("aorta_results_dir_resolved, aorta_docker_image: not set;")


def test_a_cluster_file_gone_costs_a_warning_not_the_record(tmp_path):
    out = action().run(task_vars=task_vars(tmp_path, str(tmp_path / "gone.json")))
    assert not out.get("failed") and out["files"] == ["unhealthy.txt"]
    assert out["warnings"][0].startswith("healthy.cluster.json not written: ")
    assert (tmp_path / "results" / "run.json").is_file() and not (
        tmp_path / "results" / "healthy.cluster.json"
    ).exists()


def test_a_record_that_cannot_be_written_fails(tmp_path):
    found = task_vars(tmp_path)
    Path(found["aorta_results_dir_resolved"]).write_text("a file, not a directory")
    out = action().run(task_vars=found)
    assert out["failed"] and out["msg"].startswith(f"cannot write {found['aorta_results_dir_resolved']}/run.json")


def test_localhost_as_a_node_keeps_its_node_values_and_its_collection(tmp_path):
    found = task_vars(tmp_path)
    hostvars = found["hostvars"]
    hostvars["localhost"] |= hostvars.pop("n2")
    found["groups"] = {"aorta_nodes": ["n0", "n1", "localhost"]}
    out = action(check_mode=True).run(task_vars=found)
    assert out["status"]["status"] == "COMPLETED" and out["ansible_stats"]["data"]["aorta_manifest"].endswith(".json")


def test_write_text_keeps_an_unchanged_file_and_sets_the_mode(tmp_path):
    path = str(tmp_path / "f.txt")
    assert write_text(path, "a", 0o600) is True and mode(path) == 0o600
    assert write_text(path, "a", 0o600) is False
    assert write_text(path, "a", 0o644) is True and mode(path) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["f.txt"]


def test_ansible_playbook_takes_the_stats_from_the_actions_result(tmp_path):
    """ansible-core honours any task result's ansible_stats, not only set_stats': AWX gets them
    from run_record's own result. Once through ansible-playbook, with the role as the play runs it."""
    found = task_vars(tmp_path, cluster_file(tmp_path))
    hostvars = found.pop("hostvars")
    inventory = {
        "all": {
            "hosts": {"localhost": {"ansible_connection": "local", **hostvars.pop("localhost")}},
            "children": {
                "aorta_nodes": {"hosts": {name: {"ansible_connection": "local", **v} for name, v in hostvars.items()}}
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    settings = {k: v for k, v in found.items() if k != "groups"}
    show = {"ansible.builtin.copy": {"content": "{{ aorta_run_record | to_json }}", "dest": str(tmp_path / "out.json")}}
    play = {"hosts": "localhost", "gather_facts": False, "vars": settings, "roles": ["aorta.cluster.run_record"]}
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([play, {"hosts": "localhost", "gather_facts": False, "tasks": [show]}])
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_SHOW_CUSTOM_STATS="1")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml")]
    argv += ["-i", str(tmp_path / "inventory.yml"), "-e", json.dumps({"ansible_python_interpreter": sys.executable})]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    stats = proc.stdout.split("CUSTOM STATS:", 1)[1]
    assert '"aorta_run_status": "COMPLETED"' in stats and '"aorta_excluded_nodes": [  "n0" ]' in stats
    # The say task prints the action's lines; no line and no result holds the cluster file's password.
    assert "run r1: COMPLETED - all 2 nodes completed; 1 excluded by preflight: n0" in proc.stdout
    assert PASSWORD not in proc.stdout and PASSWORD not in (tmp_path / "out.json").read_text()
    assert json.loads((tmp_path / "out.json").read_text())["status"]["status"] == "COMPLETED"
