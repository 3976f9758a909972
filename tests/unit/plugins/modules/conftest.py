# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module the way Ansible does: a child Python process given its arguments as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def run_module():
    def run(module, args, check=False):
        payload = {"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check)}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(
            [sys.executable, str(Path(module.__file__))],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        return json.loads(out.stdout)

    return run
