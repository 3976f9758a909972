# SPDX-License-Identifier: GPL-3.0-or-later
"""run_container as Ansible runs it, with a docker CLI stand-in whose `exec` runs the command
here (container paths are host paths in these tests): start, write proof, floor, build."""

from __future__ import annotations

import os

from ansible_collections.aorta.cluster.plugins.modules import run_container


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


def test_start_proves_writes_and_reads_the_floor_from_the_file_systems_clock(run_module, tmp_path):
    result = run_module(run_container, args(tmp_path))
    assert result["changed"] and result["container_id"] == "c0ffee"
    out = tmp_path / "aorta" / "aorta_runs" / "r1"
    assert out.is_dir() and list(out.iterdir()) == []  # the proof file is gone again
    assert abs(result["start_floor"] - os.stat(out).st_mtime) < 2
    assert (tmp_path / "aorta" / ".aorta-cluster" / "r1" / "node_0").is_dir()


def test_a_directory_the_container_cannot_write_names_root_squash(run_module, tmp_path):
    # What root_squash does to the container's root, made so that root meets it too: a path
    # under a regular file cannot be created by anyone.
    blocker = tmp_path / "aorta" / "not-a-dir"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("")
    result = run_module(run_container, args(tmp_path, writable=[str(blocker / "run")], floor_dir=None))
    assert result["failed"]
    assert f"the container (as root) cannot write under {tmp_path / 'aorta'}" in result["msg"]
    assert "Not a directory" in result["msg"] and "root_squash" in result["msg"]


def test_a_failing_build_names_the_step_with_its_exit_code_and_stderr(run_module, tmp_path):
    result = run_module(
        run_container, args(tmp_path, build=["sh", "-c", "echo 'hipcc: command not found' >&2; exit 3"])
    )
    assert result["failed"] and result["msg"].startswith("Build RCCL on the node:")
    assert result["rc"] == 3 and result["stderr_lines"] == ["hipcc: command not found"]


def test_docker_run_failure_and_check_mode(run_module, tmp_path):
    failed = run_module(run_container, args(tmp_path, run_argv=[fake_docker(tmp_path, 125), "run", "img"]))
    assert failed["failed"] and failed["rc"] == 125 and failed["stderr_lines"] == ["no such image"]
    checked = run_module(run_container, args(tmp_path), check=True)
    assert not checked["changed"] and checked["run_argv"][1] == "run"
