# SPDX-License-Identifier: GPL-3.0-or-later
"""run_start as a play runs it: templated variables in, the run's facts out, its results directory
made in the controller's own Python; a bad run id is one line naming the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent


def test_the_facts_and_the_results_directory(play, tmp_path):
    _rc, out = play(
        {"aorta.cluster.run_start": {}},
        {
            "site": "lab",
            "aorta_run_id": "{{ site }}-7",
            "aorta_results_root": str(tmp_path / "res"),
            # Set by the run later (as aorta_run_id_resolved is for every node): left out, not fatal.
            "aorta_baseline": "{{ not_yet_defined }}",
        },
    )
    assert not out.get("failed"), out
    assert out["aorta_run_id_resolved"] == "lab-7" and out["changed"] is True
    assert out["aorta_results_dir_made"] is True  # a collection of an id no node holds removes it
    assert out["aorta_results_dir_resolved"] == str(tmp_path / "res" / "lab-7")
    assert os.path.isdir(tmp_path / "res" / "lab-7" / "logs")
    assert "ansible_facts" not in out  # the role's set_fact keeps them as play variables
    assert isinstance(out["aorta_run_started_epoch"], int)
    assert out["aorta_rank_order"] == []  # no aorta_nodes group in this inventory
    # The run's own first line, and its effective aorta_* variables as templated (secrets masked).
    run_dir = tmp_path / "res" / "lab-7"
    assert (run_dir / "console.log").read_text() == f"run lab-7 on 0 nodes; results in {run_dir}\n"
    effective = json.loads((run_dir / "variables.json").read_text())
    assert out["variables_file"] == str(run_dir / "variables.json")
    assert effective["aorta_run_id"] == "lab-7" and effective["aorta_results_root"] == str(tmp_path / "res")
    assert "aorta_baseline" not in effective and not out.get("warnings"), out.get("warnings")


def test_a_bad_run_id_fails_naming_it_and_makes_nothing(play, tmp_path):
    _rc, out = play(
        {"aorta.cluster.run_start": {}}, {"aorta_run_id": "a/../b", "aorta_results_root": str(tmp_path / "r")}
    )
    assert out["failed"] and out["msg"].startswith("aorta_run_id: a/../b may hold only")
    assert not (tmp_path / "r").exists()


def test_a_run_recorded_already_is_refused_to_a_run_and_a_watch_and_kept_by_a_collection(play, tmp_path):
    """A run or a watch given the id of a recorded run would write a second record over the first:
    refused in one line naming the run's status, nothing written. A collection adds its tree to the
    recorded run, and keeps the run's own variables.json."""
    recorded = tmp_path / "r" / "done"
    recorded.mkdir(parents=True)
    (recorded / "run.json").write_text(json.dumps({"run_id": "done", "status": "FAILED", "message": "node b died"}))
    (recorded / "variables.json").write_text('{"aorta_run_id": "done"}')
    before = {p: p.read_bytes() for p in recorded.rglob("*")}
    given = {"aorta_run_id": "done", "aorta_results_root": str(tmp_path / "r")}
    for purpose, said in (("run", "aorta_run_id: run done has ended"), ("watch", "watch: run done has ended")):
        _rc, out = play({"aorta.cluster.run_start": {"purpose": purpose}}, given)
        assert out["failed"] and out["msg"].startswith(said), out
        assert f"recorded in {recorded / 'run.json'} (FAILED: node b died)" in out["msg"]
        assert "aorta.cluster.trace_collect -e aorta_run_id=done" in out["msg"]
        assert {p: p.read_bytes() for p in recorded.rglob("*")} == before
    # A directory that was there is never the collection's to remove; recorded/logs is made, all the same.
    _rc, out = play({"aorta.cluster.run_start": {"purpose": "collect"}}, given)
    assert not out.get("failed"), out
    assert out["changed"] is True and out["aorta_results_dir_made"] is False
    assert (recorded / "variables.json").read_text() == '{"aorta_run_id": "done"}'
    assert (recorded / "run.json").read_bytes() == before[recorded / "run.json"]


def test_the_runs_secret_is_random_or_the_environments_and_never_shown(play, tmp_path, monkeypatch):
    monkeypatch.delenv("AORTA_RUN_SECRET", raising=False)
    _rc, out = play({"aorta.cluster.run_start": {}}, {"aorta_results_root": str(tmp_path / "r")})
    first = out["aorta_run_secret_resolved"]
    assert len(first) == 64 and int(first, 16) >= 0
    _rc, again = play({"aorta.cluster.run_start": {}}, {"aorta_results_root": str(tmp_path / "r")})
    assert again["aorta_run_secret_resolved"] != first
    given = "ab" * 32
    monkeypatch.setenv("AORTA_RUN_SECRET", given)
    _rc, out = play({"aorta.cluster.run_start": {}}, {"aorta_results_root": str(tmp_path / "r")})
    assert out["aorta_run_secret_resolved"] == given
    monkeypatch.setenv("AORTA_RUN_SECRET", "not-hex-" + given)
    _rc, out = play({"aorta.cluster.run_start": {}}, {"aorta_results_root": str(tmp_path / "bad")})
    assert out["failed"] and out["msg"] == "AORTA_RUN_SECRET: must be 64 hex digits (32 bytes)"
    assert not (tmp_path / "bad").exists()


def test_the_secret_never_reaches_the_console_even_verbose(tmp_path):
    given = "cd" * 32
    book = tmp_path / "start.yml"
    task = {"name": "start", "aorta.cluster.run_start": {}, "register": "started"}
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    env = dict(os.environ, AORTA_RUN_SECRET=given, ANSIBLE_NOCOLOR="1", ANSIBLE_DISPLAY_OK_HOSTS="true")
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    argv = [str(BIN / "ansible-playbook"), str(book), "-i", "localhost,", "-c", "local", "-vvv"]
    argv += ["-e", json.dumps({"aorta_results_root": str(tmp_path / "r")})]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "results in " + str(tmp_path / "r") in proc.stdout
    assert given not in proc.stdout + proc.stderr
