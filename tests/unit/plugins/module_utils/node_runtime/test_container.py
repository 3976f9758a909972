# SPDX-License-Identifier: GPL-3.0-or-later
"""_container.start with a scripted docker: the order of its steps, and the first failure stops it."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._container import (
    PROBE_FILE,
    ContainerError,
    start,
)


def scripted(answers):
    """run_command that records each argv and answers by the docker subcommand (exec: by the script's word)."""
    calls = []

    def run(argv):
        calls.append(argv)
        key = argv[1] if argv[1] != "exec" else argv[3]
        return answers.get(key, (0, "", ""))

    return run, calls


def test_the_steps_in_order_and_the_floor_from_the_probe_file(tmp_path):
    (tmp_path / PROBE_FILE).write_text("")
    run, calls = scripted({"run": (0, "c0ffee\n", ""), "inspect": (0, "true\n", ""), "rm": (1, "", "no such")})
    started = start(
        run, "docker", "c", ["docker", "run", "-d", "img"], str(tmp_path / "run"), "/src", ["/w"],
        {"container": "/w", "host": str(tmp_path)}, ["bash", "build.sh"],
    )  # fmt: skip
    assert started == {
        "container_id": "c0ffee",
        "start_floor": (tmp_path / PROBE_FILE).stat().st_mtime,
        "removed_same_name": False,
    }
    assert [c[1] if c[1] != "exec" else c[3] for c in calls] == ["rm", "run", "inspect", "sh", "sh", "bash"]
    assert (tmp_path / "run").is_dir()


def test_a_container_that_is_not_running_stops_before_anything_runs_in_it(tmp_path):
    run, calls = scripted({"inspect": (0, "false\n", "")})
    with pytest.raises(ContainerError, match="is not running right after its start"):
        start(run, "docker", "c", ["docker", "run"], str(tmp_path / "run"), "/src", ["/w"], None, ["bash", "b.sh"])
    assert not [c for c in calls if c[1] == "exec"]


def test_a_failed_build_keeps_its_exit_code_and_stderr(tmp_path):
    run, _calls = scripted({"inspect": (0, "true", ""), "bash": (2, "", "boom\n")})
    with pytest.raises(ContainerError) as caught:
        start(run, "docker", "c", ["docker", "run"], str(tmp_path / "run"), "/src", [], None, ["bash", "b.sh"])
    assert caught.value.extra["rc"] == 2 and caught.value.extra["stderr_lines"] == ["boom"]


def test_a_container_gone_at_once_says_what_the_engine_did_to_it(tmp_path):
    answers = {
        "run": (0, "c0ffee0123456789\n", ""),
        "inspect": (1, "", "Error: No such object: c"),
        "events": (0, "create\nstart\ndie (exit 137)\ndestroy\n", ""),
    }
    run, calls = scripted(answers)
    with pytest.raises(ContainerError) as caught:
        start(run, "docker", "c", ["docker", "run"], str(tmp_path / "run"), "/src", [], None, ())
    assert str(caught.value) == (
        "the container c is not running right after its start: Error: No such object: c; docker run returned "
        "c0ffee012345; the engine's events for it: create, start, die (exit 137), destroy"
    )
    assert calls[-1][:2] == ["docker", "events"] and "container=c0ffee0123456789" in calls[-1]
