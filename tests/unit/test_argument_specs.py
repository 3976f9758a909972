# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role's argument_specs match roles/variables.yml and the role's defaults."""

from __future__ import annotations

import json
import re
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


def _docs_defaults(repo) -> dict:
    """variables.md's default column, as text between backticks, by variable."""
    rows = {}
    for line in (repo / "docs" / "variables.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 5 and cells[0].startswith("`aorta_"):
            rows[cells[0].strip("`")] = cells[2].strip("`").replace("\\|", "|")
    return rows


def test_variables_md_shows_each_variables_default_as_every_role_has_it(repo):
    """A doc that repeats code: each role's defaults/main.yml value, read here independently of the
    generator, is the one variables.md shows, and no two roles disagree."""
    shown = _docs_defaults(repo)
    registry = yaml.safe_load((repo / "roles" / "variables.yml").read_text())
    assert set(shown) == set(registry["variables"])
    for role in registry["roles"]:
        defaults = yaml.safe_load((repo / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        for name, value in defaults.items():
            if name.endswith("_resolved"):
                continue
            if isinstance(value, str) and "{{" in value:
                value_text = re.sub(r"\{\{\s*(.*?)\s*\}\}", r"<\1>", value)
            else:
                value_text = json.dumps(value)
            assert shown[name] == value_text, f"roles/{role}/defaults/main.yml: {name}"
    must = [line for line in (repo / "docs" / "variables.md").read_text().splitlines() if line.startswith("- `aorta_")]
    assert {line.split("`")[1] for line in must} == {n for n, s in registry["variables"].items() if "must_set" in s}
    assert "aorta_docker_image" in {line.split("`")[1] for line in must}
