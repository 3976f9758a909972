# SPDX-License-Identifier: GPL-3.0-or-later
"""run_container as Ansible runs it, with a docker CLI stand-in whose `exec` runs the command
here (container paths are host paths in these tests): start, write proof, floor, build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.modules import run_container

MODULE = Path(run_container.__file__)


def fake_docker(tmp_path, run_rc=0):
    script = tmp_path / f"docker-{run_rc}"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/docker.log\n'
        'case "$1" in\n'
        '  exec) shift 2; exec "$@";;\n'
        f"  run) [ {run_rc} = 0 ] && echo c0ffee && exit 0; echo 'no such image' >&2; exit 125;;\n"
        "  inspect) echo true;;\n"
        "  rm) exit 1;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return str(script)


def run_module(args, check=False):
    payload = {"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check)}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, str(MODULE)], input=json.dumps(payload), capture_output=True, text=True, env=env, check=False
    )
    return json.loads(out.stdout)


def args(tmp_path, **over):
    out = tmp_path / "aorta" / "aorta_runs" / "r1"
    base = {
        "container": "aorta-benchmark-r1",
        "run_argv": [fake_docker(tmp_path), "run", "-d", "--name", "aorta-benchmark-r1", "img", "sleep", "9"],
        "run_dir": str(tmp_path / "aorta" / ".aorta-cluster" / "r1" / "node_0"),
        "mount_source": str(tmp_path / "aorta"),
        "writable": [str(out)],
        "floor_dir": {"container": str(out), "host": str(out)},
        "docker": fake_docker(tmp_path),
    }
    base.update(over)
    return base


def test_start_proves_writes_and_reads_the_floor_from_the_file_systems_clock(tmp_path):
    result = run_module(args(tmp_path))
    assert result["changed"] and result["container_id"] == "c0ffee"
    out = tmp_path / "aorta" / "aorta_runs" / "r1"
    assert out.is_dir() and list(out.iterdir()) == []  # the proof file is gone again
    assert abs(result["start_floor"] - os.stat(out).st_mtime) < 2
    assert (tmp_path / "aorta" / ".aorta-cluster" / "r1" / "node_0").is_dir()


def test_a_directory_the_container_cannot_write_names_root_squash(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        target = str(locked / "sub")
        result = run_module(args(tmp_path, writable=[target], floor_dir=None))
    finally:
        locked.chmod(0o700)
    if os.getuid() == 0:  # root writes anyway: the proof passes, as it would for the container's root
        assert result["changed"]
    else:
        assert result["failed"] and "cannot write under" in result["msg"] and "root_squash" in result["msg"]


def test_a_failing_build_names_the_step_with_its_exit_code_and_stderr(tmp_path):
    result = run_module(args(tmp_path, build=["sh", "-c", "echo 'hipcc: command not found' >&2; exit 3"]))
    assert result["failed"] and result["msg"].startswith("Build RCCL on the node:")
    assert result["rc"] == 3 and result["stderr_lines"] == ["hipcc: command not found"]


def test_docker_run_failure_and_check_mode(tmp_path):
    failed = run_module(args(tmp_path, run_argv=[fake_docker(tmp_path, 125), "run", "img"]))
    assert failed["failed"] and failed["rc"] == 125 and failed["stderr_lines"] == ["no such image"]
    checked = run_module(args(tmp_path), check=True)
    assert not checked["changed"] and checked["run_argv"][1] == "run"
