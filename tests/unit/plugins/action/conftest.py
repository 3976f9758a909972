# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a task of this collection through ansible-playbook on localhost, as a user's play would:
the action plugin runs in the controller process, its module (if any) on "the node" (here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent


@pytest.fixture
def play(tmp_path):
    def run(task: dict, extra_vars: dict | None = None) -> tuple[int, dict]:
        playbook = tmp_path / "play.yml"
        task = dict(task, register="aorta_out", ignore_errors=True)
        show = {"ansible.builtin.copy": {"content": "{{ aorta_out | to_json }}", "dest": str(tmp_path / "out.json")}}
        playbook.write_text(
            yaml.safe_dump(
                [{"hosts": "localhost", "gather_facts": False, "connection": "local", "tasks": [task, show]}]
            )
        )
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        argv = [str(BIN / "ansible-playbook"), str(playbook), "-i", "localhost,"]
        argv += ["-e", json.dumps({"ansible_python_interpreter": sys.executable, **(extra_vars or {})})]
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        out = tmp_path / "out.json"
        assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
        return proc.returncode, json.loads(out.read_text())

    return run
