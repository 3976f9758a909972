# SPDX-License-Identifier: GPL-3.0-or-later
"""run_start as a play runs it: templated variables in, the run's facts out, its results directory
made in the controller's own Python; a bad run id is one line naming the variable."""

from __future__ import annotations

import os


def test_the_facts_and_the_results_directory(play, tmp_path):
    _rc, out = play(
        {"aorta.cluster.run_start": {}},
        {"site": "lab", "aorta_run_id": "{{ site }}-7", "aorta_results_root": str(tmp_path / "res")},
    )
    assert not out.get("failed"), out
    assert out["aorta_run_id_resolved"] == "lab-7" and out["changed"] is True
    assert out["aorta_results_dir_resolved"] == str(tmp_path / "res" / "lab-7")
    assert os.path.isdir(tmp_path / "res" / "lab-7" / "logs")
    assert "ansible_facts" not in out  # the role's set_fact keeps them as play variables
    assert isinstance(out["aorta_run_started_epoch"], int)
    assert out["aorta_rank_order"] == []  # no aorta_nodes group in this inventory


def test_a_bad_run_id_fails_naming_it_and_makes_nothing(play, tmp_path):
    _rc, out = play(
        {"aorta.cluster.run_start": {}}, {"aorta_run_id": "a/../b", "aorta_results_root": str(tmp_path / "r")}
    )
    assert out["failed"] and out["msg"].startswith("aorta_run_id: a/../b may hold only")
    assert not (tmp_path / "r").exists()
