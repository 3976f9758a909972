# SPDX-License-Identifier: GPL-3.0-or-later
"""say prints the run's own lines as they are, even with ok results hidden (the project's
ansible.cfg and the execution environment hide them, and debug's message with them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.aorta.cluster.plugins.action.say import lines_of

REPO = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent


def test_lines_of_a_string_a_list_and_nothing():
    assert lines_of("one\ntwo\n\n") == ["one", "two"]
    assert lines_of(["a", None, "", "b\nc", 3]) == ["a", "b", "c", "3"]
    assert lines_of(None) == []


def test_the_lines_reach_the_console_with_ok_results_hidden(tmp_path):
    tasks = [
        {"name": "say", "aorta.cluster.say": {"msg": ["run r1: COMPLETED - all {{ n }} nodes completed", "nodes: 3"]}},
        {"name": "debug", "ansible.builtin.debug": {"msg": "a debug line"}},
    ]
    book = tmp_path / "say.yml"
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(book), "-i", "localhost,", "-c", "local", "-e", json.dumps({"n": 3})]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    lines = proc.stdout.splitlines()
    assert "run r1: COMPLETED - all 3 nodes completed" in lines and "nodes: 3" in lines
    assert "a debug line" not in proc.stdout  # display_ok_hosts = False: why the run says its lines with say
