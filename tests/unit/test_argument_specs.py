# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role's argument_specs match roles/variables.yml and the role's defaults."""

from __future__ import annotations

import subprocess
import sys

import yaml


def test_argument_specs_are_generated_from_the_current_sources(repo):
    result = subprocess.run(
        [sys.executable, str(repo / "tools" / "gen_argument_specs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_every_role_default_is_documented_and_prefixed(repo):
    registry = yaml.safe_load((repo / "roles" / "variables.yml").read_text())
    for role in registry["roles"]:
        defaults = yaml.safe_load((repo / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        for name in defaults:
            assert name.startswith("aorta_"), f"{role}: {name}"
            assert name in registry["variables"] or name.endswith("_resolved"), f"{role}: {name}"
