# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/variables.yml is each aorta_* fact's one home: every file generated from it is current, no
role carries a default of its own, and the names each step reads come from it."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.action import node_end, node_prepare
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import READ_BY
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _plan


def _tool(repo):
    spec = importlib.util.spec_from_file_location("gen_argument_specs", repo / "tools" / "gen_argument_specs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_argument_specs_are_generated_from_the_current_sources(repo):
    result = subprocess.run(
        [sys.executable, str(repo / "tools" / "gen_argument_specs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_only_the_defaults_role_has_defaults(repo):
    """A second copy of a default is how 73 variables came to be defaulted in two or more roles."""
    found = sorted(str(p.relative_to(repo)) for p in repo.glob("roles/*/defaults/*"))
    assert found == ["roles/defaults/defaults/main.yml"]
    for meta in repo.glob("roles/*/meta/main.yml"):
        if meta.parts[-3] != "defaults":
            assert {"role": "aorta.cluster.defaults"} in yaml.safe_load(meta.read_text())["dependencies"], meta


def test_each_step_reads_the_names_its_role_lists(repo):
    assert READ_BY["preflight"] == node_prepare.NAMES
    assert READ_BY["container_launch"] == _plan.LAUNCH_NAMES
    assert READ_BY["trace_collect"] == node_end.NAMES
    registry = yaml.safe_load((repo / "roles" / "variables.yml").read_text())
    defaults = yaml.safe_load((repo / "roles" / "defaults" / "defaults" / "main.yml").read_text())
    for role, names in READ_BY.items():
        # A name a step reads has a default, or the run (the inventory, run_context) sets it.
        unset = [n for n in names if n not in defaults and n not in registry["required"]]
        assert unset == [], role


def test_a_variable_without_a_default_is_refused(repo, tmp_path):
    tool = _tool(repo)
    text = (repo / "roles" / "variables.yml").read_text()
    (tmp_path / "roles").mkdir()
    broken = text.replace("    default: config/distributed.yaml\n", "", 1)
    assert broken != text
    (tmp_path / "roles" / "variables.yml").write_text(broken)
    with pytest.raises(SystemExit, match=r"variables\.aorta_base_config: no default"):
        tool.load(tmp_path)


def _docs_defaults(repo) -> dict:
    """variables.md's default column, as text between backticks, by variable."""
    rows = {}
    for line in (repo / "docs" / "variables.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 5 and cells[0].startswith("`aorta_"):
            rows[cells[0].strip("`")] = cells[2].strip("`").replace("\\|", "|")
    return rows


def test_variables_md_shows_each_variables_default_as_the_defaults_role_has_it(repo):
    """A doc that repeats code: the defaults role's value, read here independently of the
    generator, is the one variables.md shows."""
    shown = _docs_defaults(repo)
    registry = yaml.safe_load((repo / "roles" / "variables.yml").read_text())
    assert set(shown) == set(registry["variables"])
    defaults = yaml.safe_load((repo / "roles" / "defaults" / "defaults" / "main.yml").read_text())
    assert set(defaults) == set(registry["variables"])
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            value_text = re.sub(r"\{\{\s*(.*?)\s*\}\}", r"<\1>", value)
        else:
            value_text = json.dumps(value)
        assert shown[name] == value_text, name
    must = [line for line in (repo / "docs" / "variables.md").read_text().splitlines() if line.startswith("- `aorta_")]
    assert {line.split("`")[1] for line in must} == {n for n, s in registry["variables"].items() if "must_set" in s}
    assert "aorta_docker_image" in {line.split("`")[1] for line in must}
