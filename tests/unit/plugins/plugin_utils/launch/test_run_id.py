# SPDX-License-Identifier: GPL-3.0-or-later
"""_run_id: the run id (given or made, always safe in names and paths), its start and the results
directory, fixed once on the controller."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _run_id

NOW = dt.datetime(2026, 12, 3, 10, 15, 0, tzinfo=dt.timezone.utc)


def test_a_made_id_is_the_utc_start_and_six_hex_digits_and_two_differ():
    assert _run_id.run_id("", NOW, "a1b2c3") == "20261203T101500-a1b2c3"
    made = {_run_id.run_id("", NOW) for _i in range(20)}
    assert len(made) == 20 and all(_run_id.RUN_ID.match(m) for m in made)


@pytest.mark.parametrize("bad", ["../etc", "a b", "-lead", "x" * 65, "run;rm"])
def test_an_id_unsafe_in_names_and_paths_is_refused_naming_the_variable(bad):
    with pytest.raises(_run_id.RunStartError, match=r"^aorta_run_id: .* may hold only letters"):
        _run_id.run_id(bad, NOW)


def test_the_results_directory_is_given_or_under_the_root_and_absolute(tmp_path):
    cwd = str(tmp_path)
    assert _run_id.results_dir("", "", "r1", cwd) == os.path.join(cwd, "aorta_results", "r1")
    assert _run_id.results_dir("", "/srv/res", "r1", cwd) == "/srv/res/r1"
    assert _run_id.results_dir("out/x", "/srv/res", "r1", cwd) == os.path.join(cwd, "out", "x")


def test_start_gives_exactly_the_facts_the_plays_read(tmp_path):
    facts = _run_id.start({"aorta_run_id": "r1", "aorta_results_root": "res"}, NOW, str(tmp_path))
    assert tuple(facts) == _run_id.FACTS
    assert facts["aorta_run_started_epoch"] == int(NOW.timestamp())
    assert facts["aorta_results_dir_resolved"] == str(tmp_path / "res" / "r1")


def test_the_results_directory_and_its_logs_are_made_once(tmp_path):
    results = str(tmp_path / "res" / "r1")
    assert _run_id.make_dirs(results) is True
    assert oct(os.stat(os.path.join(results, "logs")).st_mode & 0o777) in ("0o755", "0o775", "0o750", "0o700")
    assert _run_id.make_dirs(results) is False
    (tmp_path / "file").write_text("")
    with pytest.raises(_run_id.RunStartError, match=r"^aorta_results_dir: cannot create .*/file/r1/logs"):
        _run_id.make_dirs(str(tmp_path / "file" / "r1"))
