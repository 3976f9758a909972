# SPDX-License-Identifier: GPL-3.0-or-later
"""run_supervisor as Ansible runs it, with a docker CLI stand-in that runs `exec` commands here:
the lease is renewed with the supervisor's own process and released at the end, the container
is removed, the status file says finished."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import Lease
from ansible_collections.aorta.cluster.plugins.modules import run_supervisor


def fake_docker(tmp_path):
    """`exec` runs here, `inspect` says running, the rest is logged."""
    script = tmp_path / "docker"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = exec ]; then shift 2; exec "$@"; fi\necho "$@" >> {tmp_path}/docker.log\n'
        'if [ "$1" = inspect ]; then echo true; fi\n'
    )
    script.chmod(0o755)
    return str(script)


def test_a_run_that_exits_is_recorded_and_cleaned_up(run_module, tmp_path):
    metrics = tmp_path / "out"
    metrics.mkdir()
    (metrics / "rank_01_metrics.jsonl").write_text("{}\n{}\n{}\n")
    log = tmp_path / "node.log"
    args = {
        "run_id": "r1",
        "container": "c-r1",
        "command": ["sh", "-c", f"echo step > {log}; exit 0"],
        "timeout_seconds": 30,
        "directory": str(tmp_path / "state"),
        "log": str(log),
        "progress_dir": str(metrics),
        "ranks": [0, 1],
        "docker": fake_docker(tmp_path),
    }
    Lease(args["directory"]).acquire({"run_id": "r1", "owner": "me@ctl", "expires_at": 9e9})
    result = run_module(run_supervisor, args)
    status = result["status"]
    assert status["outcome"] == "ok" and status["rc"] == 0 and status["log_tail"] == "step"
    assert status["progress"] == {"0": 0, "1": 3}
    assert json.loads(Path(result["status_path"]).read_text())["finished"] is True
    assert (tmp_path / "docker.log").read_text().split() == ["rm", "-f", "-v", "c-r1"]
    assert Lease(args["directory"]).read() is None  # released with the run


def test_another_runs_live_lease_stops_the_launch(run_module, tmp_path):
    state = str(tmp_path / "state")
    Lease(state).acquire({"run_id": "other", "owner": "you@ctl", "expires_at": 9e9})
    marker = tmp_path / "ran"
    result = run_module(
        run_supervisor,
        {
            "run_id": "mine",
            "container": "c",
            "command": ["touch", str(marker)],
            "timeout_seconds": 30,
            "directory": state,
            "docker": fake_docker(tmp_path),
        },
    )
    assert result["failed"] and "held by run other (owner you@ctl" in result["msg"]
    assert not marker.exists()


def test_check_mode_runs_nothing_and_shows_the_commands(run_module, tmp_path):
    result = run_module(
        run_supervisor,
        {"run_id": "r", "container": "c", "command": ["true"], "timeout_seconds": 5, "directory": str(tmp_path)},
        check=True,
    )
    assert result["command"] == ["docker", "exec", "c", "true"]
    assert result["cleanup"][-1] == ["docker", "rm", "-f", "-v", "c"]
    assert not (tmp_path / "runs").exists()


def wait_for(predicate, seconds=60.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_detach_starts_the_container_returns_at_once_and_the_run_goes_on_alone(run_module, tmp_path):
    """One module run starts the container and the supervisor; the module answers while the workload
    still waits for a file that only this test writes after the answer (without the detach it would
    answer at the 30 s deadline, with a status and no pid)."""
    go, out = tmp_path / "go", tmp_path / "out"
    docker = fake_docker(tmp_path)
    args = {
        "run_id": "r2",
        "container": "c-r2",
        "command": ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"],
        "timeout_seconds": 30,
        "directory": str(tmp_path / "state"),
        "docker": docker,
        "start": {
            "run_argv": [docker, "run", "-d", "--name", "c-r2", "img"],
            "run_dir": str(tmp_path / "run"),
            "mount_source": str(tmp_path),
            "writable": [str(out)],
            "floor_dir": {"container": str(out), "host": str(out)},
        },
        "detach": True,
        "attach": {"launch": {"rank": 0, "status_path": "s"}, "prepare": {"reached": True}, "run_started_epoch": 7},
    }
    Lease(args["directory"]).acquire({"run_id": "r2", "owner": "me@ctl", "expires_at": 9e9})
    result = run_module(run_supervisor, args)
    assert "status" not in result and result["pid"] > 0, result
    # What a re-attached watch reads back: the controller's results, the supervisor's pid, owner-only.
    kept = Path(args["directory"]) / "runs" / "r2.attach.json"
    assert json.loads(kept.read_text()) == dict(args["attach"], supervisor_pid=result["pid"], started=result["started"])
    assert kept.stat().st_mode & 0o777 == 0o600
    assert result["started"]["container_id"] == "" and isinstance(result["started"]["start_floor"], float)
    held = Lease(args["directory"]).read()
    assert held["run_id"] == "r2" and held["holder_pid"] == result["pid"]  # the detached process holds it
    go.touch()
    status_file = Path(result["status_path"])
    assert wait_for(lambda: status_file.exists() and json.loads(status_file.read_text()).get("finished"))
    assert json.loads(status_file.read_text())["outcome"] == "ok"
    assert wait_for(lambda: Lease(args["directory"]).read() is None)  # released at the run's end
    assert (tmp_path / "docker.log").read_text().split()[-4:] == ["rm", "-f", "-v", "c-r2"]


def test_detach_says_why_the_supervisor_refused_and_runs_nothing(run_module, tmp_path):
    state = str(tmp_path / "state")
    Lease(state).acquire({"run_id": "other", "owner": "you@ctl", "expires_at": 9e9})
    marker = tmp_path / "ran"
    args = {
        "run_id": "mine",
        "container": "c",
        "command": ["touch", str(marker)],
        "timeout_seconds": 30,
        "directory": state,
        "docker": fake_docker(tmp_path),
        "detach": True,
    }
    result = run_module(run_supervisor, args)
    assert result["failed"] and "held by run other (owner you@ctl" in result["msg"]
    assert not marker.exists() and Lease(state).read()["run_id"] == "other"
