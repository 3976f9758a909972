# SPDX-License-Identifier: GPL-3.0-or-later
"""run_history in-process, and playbooks/run_history.yml through ansible-playbook: the history of a
results root rebuilt from the runs under it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.action.run_history import ActionModule

REPO = Path(__file__).resolve().parents[4]
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


def action(args, check_mode=False):
    task = SimpleNamespace(args=args, async_val=0, check_mode=check_mode, action="aorta.cluster.run_history")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    return ActionModule(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)


def runs(root: Path, count: int) -> None:
    for index in range(count):
        folder = root / f"run-{index}"
        folder.mkdir(parents=True)
        run = dict(SAMPLE, run_id=f"20261206T08000{index}-aaaaaa", started_epoch=SAMPLE["started_epoch"] + index)
        (folder / "run.json").write_text(json.dumps(run))


def test_the_history_is_rebuilt_from_every_run_under_the_root(tmp_path):
    runs(tmp_path, 3)
    out = action({"root": str(tmp_path)}).run(task_vars={})
    assert not out.get("failed"), out
    assert out["runs"] == 3 and out["msg"] == f"history of 3 runs: {tmp_path / 'index.html'}"
    index = json.loads((tmp_path / "index.json").read_text())
    assert [row["run_id"] for row in index["runs"]] == [f"20261206T08000{i}-aaaaaa" for i in (2, 1, 0)]


def test_a_root_that_is_not_a_directory_is_one_line_and_check_mode_writes_nothing(tmp_path):
    out = action({"root": str(tmp_path / "nowhere")}).run(task_vars={})
    assert out["failed"] and out["msg"] == f"root: {tmp_path / 'nowhere'} is not a directory of runs"
    runs(tmp_path, 1)
    assert action({"root": str(tmp_path)}, check_mode=True).run(task_vars={})["changed"] is False
    assert not (tmp_path / "index.json").exists()


def test_the_playbook_rebuilds_the_results_root(tmp_path):
    runs(tmp_path / "root", 2)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "playbooks/run_history.yml",
            "-e",
            json.dumps({"aorta_results_root": str(tmp_path / "root")}),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"history of 2 runs: {tmp_path / 'root' / 'index.html'}" in proc.stdout
