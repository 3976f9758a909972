# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/variables.yml is each aorta_* fact's one home: every file generated from it is current, no
role carries a default of its own, and the names each step reads come from it."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.action import node_end, node_prepare
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._variables import RULES
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


# What a role's steps read, found in their code (not in READ_BY, which is what is checked): the
# aorta_* names its tasks template, its lookups name, and its action plugins name in every function
# that is handed the settings (``s``), followed from the action into the plugin_utils it calls.
_REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^aorta_[a-z0-9_]+$")
PREFIX = "ansible_collections.aorta.cluster.plugins."


def _module_path(dotted):
    p = _REPO / "plugins" / Path(*dotted[len(PREFIX) :].split("."))
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else None


_CODE: dict = {}


class _Code:
    """One Python file: its functions (methods too) by name, and what it imports of the collection."""

    def __init__(self, path):
        self.path = path
        self.tree = ast.parse(path.read_text())
        self.functions = {}
        self.imports = {}  # local name -> (module path, attr or None)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef,)):
                self.functions.setdefault(node.name, node)
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
                for alias in node.names:
                    sub = _module_path(f"{node.module}.{alias.name}")
                    if sub:
                        self.imports[alias.asname or alias.name] = (sub, None)
                    else:
                        m = _module_path(node.module)
                        if m:
                            self.imports[alias.asname or alias.name] = (m, alias.name)

    @classmethod
    def of(cls, path):
        if path not in _CODE:
            _CODE[path] = cls(path)
        return _CODE[path]


def _carries(call, names):
    return any(isinstance(a, ast.Name) and a.id in names for a in [*call.args, *[k.value for k in call.keywords]])


def _reads(module, func, seen, found):
    """The aorta_* names ``func`` holds, and those of every function it hands the settings to."""
    key = (module.path, func.name)
    if key in seen:
        return
    seen.add(key)
    params = {a.arg for a in func.args.args + func.args.kwonlyargs} & {"s", "settings", "p"} or {"s"}
    for node in ast.walk(func):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
            found.add(node.value)
        if isinstance(node, ast.Call) and _carries(node, params | {"s", "settings"}):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if f.value.id == "self":
                    for owner in [module, *(_Code.of(path) for path, _attr in module.imports.values())]:
                        if f.attr in owner.functions:
                            _reads(owner, owner.functions[f.attr], seen, found)
                            break
                elif f.value.id in module.imports:
                    path, attr = module.imports[f.value.id]
                    target = _Code.of(path)
                    if attr is None and f.attr in target.functions:
                        _reads(target, target.functions[f.attr], seen, found)
            elif isinstance(f, ast.Name):
                if f.id in module.functions:
                    _reads(module, module.functions[f.id], seen, found)
                elif f.id in module.imports:
                    path, attr = module.imports[f.id]
                    target = _Code.of(path)
                    if attr and attr in target.functions:
                        _reads(target, target.functions[attr], seen, found)


def _step_reads(action_file):
    m = _Code.of(action_file)
    found, seen = set(), set()
    for func in list(m.functions.values()):
        _reads(m, func, seen, found)
    return found


def _role_reads(role):
    """The names a role's steps read: its tasks' own templates and each step's action."""
    tasks = sorted((_REPO / "roles" / role / "tasks").glob("*.yml"))
    text = "\n".join(t.read_text() for t in tasks)
    found = set(re.findall(r"\baorta_[a-z0-9_]+\b", text))
    for lookup in sorted(set(re.findall(r"lookup\('aorta\.cluster\.(\w+)'", text))):
        found |= _step_reads(_REPO / "plugins" / "lookup" / f"{lookup}.py")
    for step in sorted(set(re.findall(r"aorta\.cluster\.(\w+):", text))):
        action = _REPO / "plugins" / "action" / f"{step}.py"
        if action.is_file():
            found |= _step_reads(action)
    return found


def test_each_role_lists_only_names_its_steps_read(repo):
    """READ_BY (roles/variables.yml's ``roles``) against the code: a name listed that no step of the
    role reads is a fact in the wrong home (preflight listed three of the launch's deadlines)."""
    for role, names in READ_BY.items():
        found = _role_reads(role)
        if role == "run_context":  # check_variables judges every variable that has a rule
            found |= set(RULES)
        assert sorted(set(names) - found) == [], role
    # The steps that read their settings in one call take them from READ_BY, not from a copy.
    assert READ_BY["preflight"] == node_prepare.NAMES
    assert READ_BY["container_launch"] == _plan.LAUNCH_NAMES
    assert READ_BY["trace_collect"] == node_end.NAMES


def test_each_step_reads_the_names_its_role_lists(repo):
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
