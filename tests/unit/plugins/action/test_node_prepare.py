# SPDX-License-Identifier: GPL-3.0-or-later
"""node_prepare over a two-node "cluster" of local hosts: the head first (its lease, the port picked
on it), then the worker (its lease, one TCP connection to the head's address); a partial cluster
refused before any node is touched; a worker not named for a head that failed; an image no node
can have named by preflight. A docker CLI stand-in answers: no test pulls from a registry."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.action.node_prepare import excluded_nodes

# "docker pull" of a tag the registry does not have, as docker 27 says it.
MANIFEST_UNKNOWN = (
    "Error response from daemon: manifest for rocm/pytorch:nope not found: manifest unknown: manifest unknown"
)
DOCKER = """#!/bin/sh
here=%s
echo "$*" >> "$here/calls"
key() { printf %%s "$1" | tr '/:' '__'; }
case "$1" in
  version) echo 27.1 ;;
  image) [ -f "$here/has-$(key "$5")" ] && echo sha256:abc && exit 0; echo "Error: No such image: $5" >&2; exit 1 ;;
  pull)
    case "$2" in *nope*) echo "%s" >&2; exit 1 ;; esac
    touch "$here/has-$(key "$2")" ;;
esac
exit 0
"""


@pytest.fixture(autouse=True)
def docker_stand_in(tmp_path, monkeypatch):
    """``docker`` on the PATH the nodes' modules see: it has no image until it pulls one, and a tag
    with ``nope`` in it does not exist; every call is kept in ``docker/calls``."""
    where = tmp_path / "docker"
    where.mkdir()
    (where / "docker").write_text(DOCKER % (where, MANIFEST_UNKNOWN))
    (where / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{where}:{os.environ['PATH']}")
    return where


PREPARE = {"name": "Probe", "aorta.cluster.node_prepare": None, "register": "aorta_prepare", "timeout": 120}
REPO = Path(__file__).resolve().parents[4]


def docker_save(path, tags):
    """A plain ``docker save`` archive: a layer and the manifest naming ``tags``."""
    with tarfile.open(path, "w") as tar:
        for name, data in (("l/layer.tar", b"x" * 4096), ("manifest.json", json.dumps([{"RepoTags": tags}]).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def run_vars(tmp_path):
    """The run's settings; the image is not on the nodes and comes from an archive on the controller
    that holds it (nothing is pulled: the tests that import these run the real docker)."""
    aorta = tmp_path / "aorta"
    (aorta / "config").mkdir(parents=True, exist_ok=True)
    (aorta / "config" / "distributed.yaml").write_text("training: {batch_size: 4}\n")
    (aorta / "train.py").write_text("")
    (tmp_path / "results").mkdir(exist_ok=True)  # run_start makes it (not under --check)
    return {
        "aorta_image_archive": docker_save(tmp_path / "image.tar", ["aorta-unit-test:absent"]),
        "aorta_run_id_resolved": "prep-run",
        "aorta_results_dir_resolved": str(tmp_path / "results"),
        "aorta_path": str(aorta),
        "aorta_require_gpu": False,
        "aorta_min_free_gb": 0,
        "aorta_docker_image": "aorta-unit-test:absent",
        "aorta_pyspy": "false",
        "aorta_port_range_start": 30300,
        "aorta_port_range_end": 30400,
        "aorta_connect_timeout": 5,
        "aorta_fabric_check_timeout": 5,
    }


def leases(tmp_path):
    return {
        "localhost": {"aorta_lease_dir": str(tmp_path / "lease-0")},
        "127.0.0.1": {"aorta_lease_dir": str(tmp_path / "lease-1")},
    }


def test_the_head_picks_the_port_and_the_worker_reaches_it(cluster_play, tmp_path, docker_stand_in):
    settings = run_vars(tmp_path) | {"aorta_image_archive": ""}  # pulled where missing
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    assert not head.get("failed") and not worker.get("failed"), (head.get("msg"), worker.get("msg"))
    # Both probe themselves at once, and a node that lacks the image pulls it in its own probe (one
    # docker here: the later one may find it pulled already); every pull is one node's.
    pulled = [r for r in (head, worker) if (r["facts"].get("pull") or {}).get("state") == "pulled"]
    assert pulled and all(r["facts"]["image_id"] == "sha256:abc" for r in (head, worker))
    assert head["derived"]["record"]["image_present"] and worker["derived"]["record"]["image_present"]
    assert (docker_stand_in / "calls").read_text().count("pull ") == len(pulled)
    assert 30300 <= head["port"] <= 30400 and "port" not in worker
    assert head["facts"]["read"]["text"].startswith("training")  # the head's config, for the report
    assert "connect" not in head["facts"]
    assert worker["facts"]["connect"]["reached"] and worker["facts"]["connect"]["source"] == "127.0.0.1"
    assert head["lease"]["result"] == worker["lease"]["result"] == "acquired"
    assert head["reached"] and worker["reached"]
    shared = json.loads((tmp_path / "results" / ".plan" / "head.json").read_text())
    assert shared["ok"] and shared["port"] == head["port"] and shared["address"] == "127.0.0.1"


def head_without_its_checkout(tmp_path, **extra):
    """(host_vars, extra_vars) of a two-node run whose head has an empty aorta_path (its preflight
    fails on the missing files) and whose worker has the real one."""
    settings = run_vars(tmp_path) | extra
    host_vars = leases(tmp_path)
    host_vars["localhost"]["aorta_path"] = str(tmp_path / "empty")
    host_vars["127.0.0.1"]["aorta_path"] = settings.pop("aorta_path")
    (tmp_path / "empty").mkdir()
    return host_vars, settings


def test_a_partial_cluster_is_refused_before_any_node_is_touched(cluster_play, tmp_path):
    host_vars = {name: dict(v, aorta_cluster_nodes=3) for name, v in leases(tmp_path).items()}
    _proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=run_vars(tmp_path))
    for result in out["aorta_prepare"].values():
        assert result["failed"] and result["msg"].startswith("2 of 3 nodes: a --limit or an AWX sliced job")
        assert result["reached"] is False
    assert not (tmp_path / "lease-0").exists() and not (tmp_path / "lease-1").exists()


def test_a_worker_is_not_named_for_the_heads_failure(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path)
    _proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    assert head["failed"] and "preflight[aorta_path]: localhost: train.py not found" in head["failures"][1]
    # One line: the first failure and how many more (every one is in failures, for run.json).
    assert head["msg"] == f"{head['failures'][0]} (+1 more in run.json)"
    assert head["msg"].startswith("preflight[aorta_path]: localhost: config/distributed.yaml not found")
    assert head["own"] is True
    # Not failed itself (the head's failure stops every node): one failure printed, not one per node.
    assert not worker["failed"] and worker["own"] is False and worker["held"] is False
    assert "the head localhost did not pass preflight" in worker["msg"]
    # Its own checks ran beside the head's (their kernel-log mark is all they leave), but the head
    # failed: the worker was never held for the run.
    assert [p.name for p in (tmp_path / "lease-1").iterdir()] == ["health-since"]


def test_with_aorta_exclude_unhealthy_a_failing_head_hands_over_to_the_first_worker_that_passes(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path, aorta_exclude_unhealthy=True)
    proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    # Not failed: left out, with its reasons; the play goes on.
    assert not head.get("failed") and head["excluded"] and "train.py not found" in " ".join(head["failures"])
    assert not worker.get("failed") and worker["elected"] and 30300 <= worker["port"] <= 30400
    shared = json.loads((tmp_path / "results" / ".plan" / "head.json").read_text())
    assert shared["head"] == "127.0.0.1" and shared["ok"] and shared["port"] == worker["port"]
    assert "preflight: 127.0.0.1 is the run's head (the head localhost did not pass preflight)" in proc.stdout
    assert (tmp_path / "lease-0").exists() and (tmp_path / "lease-1").exists()  # each holds its lease
    # The launch reads who was left out from one listing, not from every node's variables.
    excluded = excluded_nodes(str(tmp_path / "results"), settings["aorta_run_id_resolved"])
    assert list(excluded) == ["localhost"] and "train.py not found" in " ".join(excluded["localhost"]["failures"])
    assert excluded_nodes(str(tmp_path / "results"), "another-run") == {}


def test_an_image_the_registry_does_not_have_is_named_by_the_heads_preflight(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_image_archive": ""}
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    said = f"preflight[image]: localhost: rocm/pytorch:nope is not on the node and cannot be pulled: {MANIFEST_UNKNOWN}"
    assert head["failed"] and head["failures"] == [said] and head["msg"] == said
    assert head["facts"]["pull"]["state"] == "failed"
    # Checked at once beside the head, and named for its own failure in the same pass.
    assert worker["failed"] and worker["own"] is True and worker["failures"] == [said.replace("localhost", "127.0.0.1")]


def test_with_aorta_exclude_unhealthy_every_node_names_the_same_missing_image(cluster_play, tmp_path):
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_exclude_unhealthy": True}
    settings["aorta_image_archive"] = ""
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    for name, result in out["aorta_prepare"].items():
        assert result["excluded"] and result["failures"] == [
            f"preflight[image]: {name}: rocm/pytorch:nope is not on the node and cannot be pulled: {MANIFEST_UNKNOWN}"
        ]


def test_an_archive_without_the_image_is_named_before_any_copy_and_nothing_is_pulled(
    cluster_play, tmp_path, docker_stand_in
):
    archive = docker_save(tmp_path / "workload.tar", ["aorta-standin-workload:abc"])
    settings = run_vars(tmp_path) | {"aorta_docker_image": "rocm/pytorch:nope", "aorta_image_archive": archive}
    _proc, out = cluster_play([PREPARE], host_vars=leases(tmp_path), extra_vars=settings)
    head = out["aorta_prepare"]["localhost"]
    assert head["failures"] == [
        f"preflight[image]: localhost: rocm/pytorch:nope is not on the node and the archive {archive} does not "
        "hold it (it holds aorta-standin-workload:abc)"
    ]
    assert "pull " not in (docker_stand_in / "calls").read_text()
    # The archive that holds it: passes, loaded at the launch.
    holding = docker_save(tmp_path / "right.tar", ["docker.io/rocm/pytorch:nope"])
    _proc, out = cluster_play(
        [PREPARE], host_vars=leases(tmp_path), extra_vars=settings | {"aorta_image_archive": holding}
    )
    assert not out["aorta_prepare"]["localhost"].get("failed"), out["aorta_prepare"]["localhost"].get("msg")


def fatal_lines(stdout: str, node: str) -> list[str]:
    """The console's lines for ``node``'s failed results (``fatal: [node]: FAILED! => {...}``)."""
    return [line for line in stdout.splitlines() if line.startswith(f"fatal: [{node}]: FAILED! => ")]


def test_a_failed_preflight_prints_one_short_line_and_keeps_the_rest_in_the_logs(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path)
    logs = tmp_path / "results" / "logs"
    logs.mkdir(parents=True)  # as run_start makes it
    proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings)
    head, worker = out["aorta_prepare"]["localhost"], out["aorta_prepare"]["127.0.0.1"]
    (line,) = fatal_lines(proc.stdout, "localhost")
    assert len(line) < 300, line
    assert json.loads(line.split(" => ", 1)[1])["details"] == head["details"] == "logs/localhost.preflight.json"
    # own and reached are true, what the rescue and the teardown take when they are left out; Ansible
    # adds its exception marker (not printed).
    assert set(head) - {"changed", "failed", "msg", "details"} <= {"_ansible_no_log", "exception"}
    # The worker's result is short already: whole, no file.
    assert worker["msg"] == "127.0.0.1: passed its own checks, not held: the head localhost did not pass preflight"
    assert worker["own"] is False and "details" not in worker and fatal_lines(proc.stdout, "127.0.0.1") == []
    whole = json.loads((logs / "localhost.preflight.json").read_text())
    assert whole["failed"] and "preflight[aorta_path]: localhost: train.py not found" in whole["failures"][1]
    assert whole["msg"] == f"{whole['failures'][0]} (+1 more in run.json)" and whole["lease"]["result"] == "acquired"
    assert whole["facts"]["docker"]["version"] == "27.1" and whole["derived"]["fabric_if"] == "lo"
    # The msg on the console: the whole one's start, cut where the line's room ends.
    assert whole["msg"].startswith(head["msg"].removesuffix("\u2026")) and len(head["msg"]) <= 200
    assert list(logs.iterdir()) == [logs / "localhost.preflight.json"]


def test_check_mode_keeps_a_failed_preflight_whole_and_writes_no_details(cluster_play, tmp_path):
    host_vars, settings = head_without_its_checkout(tmp_path)
    logs = tmp_path / "results" / "logs"
    logs.mkdir(parents=True)  # an earlier run's: a dry run leaves it as it is
    _proc, out = cluster_play([PREPARE], host_vars=host_vars, extra_vars=settings, check=True)
    head = out["aorta_prepare"]["localhost"]
    assert head["failed"] and len(head["failures"]) == 2 and "details" not in head
    assert list(logs.iterdir()) == []


def setup_rescue(tmp_path, settings: dict, host_vars: dict, results: str) -> tuple:
    """aorta_multinode.yml's setup block over the local "cluster": preflight, and where it fails the
    rescue's facts and run_record on the controller. (console, run.json)."""
    hosts = {
        name: {"ansible_connection": "local", "aorta_node_rank": rank, "aorta_vpc_ip": "127.0.0.1"} | values
        for rank, (name, values) in enumerate(host_vars.items())
    }
    groups = {"aorta_nodes": {"hosts": hosts}, "aorta_head": {"hosts": {"localhost": {}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": groups}}))
    remember = {
        "aorta_node_setup_task": "{{ ansible_failed_task.name | default('') }}",
        "aorta_node_setup_result": "{{ ansible_failed_result | default({}) }}",
    }
    on_controller = {"delegate_to": "localhost", "run_once": True}
    rescue = [
        {"ansible.builtin.set_fact": remember},
        {"aorta.cluster.run_record": None, **on_controller},
    ]
    play = {"hosts": "aorta_nodes", "gather_facts": False, "any_errors_fatal": True}
    play |= {"roles": [{"role": "aorta.cluster.defaults"}], "tasks": [{"block": [PREPARE], "rescue": rescue}]}
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml")]
    extra = {"ansible_python_interpreter": sys.executable, **settings, "aorta_results_dir_resolved": results}
    argv += ["-i", str(tmp_path / "inventory.yml"), "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    run_json = Path(results) / "run.json"
    assert run_json.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout, json.loads(run_json.read_text())


def test_run_json_says_the_same_of_a_failed_preflight_shortened_for_the_console(tmp_path):
    """Through the playbook's own rescue: run.json from the short result and its details file is
    run.json from the whole result, word for word; only the console line changed."""
    host_vars, settings = head_without_its_checkout(tmp_path)
    found = {}
    for shortened in (False, True):
        where = tmp_path / ("short" if shortened else "whole")
        (where / "results" / ("logs" if shortened else "")).mkdir(parents=True)
        lease_dirs = {name: {"aorta_lease_dir": str(where / f"lease-{i}")} for i, name in enumerate(host_vars)}
        nodes = {name: values | lease_dirs[name] for name, values in host_vars.items()}
        found[shortened] = setup_rescue(where, settings, nodes, str(where / "results"))
    (whole_out, whole), (short_out, short) = found[False], found[True]
    assert len(max(fatal_lines(whole_out, "localhost"), key=len)) > 1000
    assert len(max(fatal_lines(short_out, "localhost"), key=len)) < 300
    assert (short["status"], short["failed_nodes"]) == ("FAILED", ["localhost"])
    assert short["unhealthy"][0]["reasons"][1].startswith("preflight[aorta_path]: localhost: train.py not found")
    assert short["message"].endswith("(+1 more in run.json)")
    assert short["diagnosis"]["summary"] == whole["diagnosis"]["summary"]
    # What differs from one run to the next: the clocks, and how long the health checks took.
    for document in (whole, short):
        for key in ("started_epoch", "finished_epoch", "diagnosis"):
            document.pop(key)
        for row in document["nodes"]:
            (row["health"] or {}).pop("seconds", None)
    assert short == whole
