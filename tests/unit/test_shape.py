# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection keeps one shape: YAML orchestrates and Python computes. Every role and role task
file runs in a playbook; the playbooks and roles hold few set_facts and no long Jinja that builds
data; every plugin source file has a test file of its own name; no function runs past 80 lines
unless its docstring says why it must."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# The launch play's rescue (each node's failed task), run_end's (why collection stopped),
# run_context's, and the re-attached watch's (what the nodes kept at launch, as the launch's results).
SET_FACTS_AT_MOST = 4
LONG_JINJA_AT_MOST = 5
LONG = 120
FUNCTION_LINES = 80
# Conditions are expressions, not data: a long `when:` is not counted.
CONDITIONS = ("when", "that", "changed_when", "failed_when", "until")


def _yaml_files() -> list[Path]:
    files = [*REPO.glob("roles/*/tasks/*.yml"), *REPO.glob("playbooks/*.yml"), *REPO.glob("*.yml")]
    return sorted(f for f in files if f.name not in ("galaxy.yml", "execution-environment.yml"))


def _walk(node, found: dict, where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.set_fact", "set_fact"):
                found["set_fact"].append(f"{where}: {node.get('name')}")
            if key not in CONDITIONS:
                _walk(value, found, where)
    elif isinstance(node, list):
        for item in node:
            _walk(item, found, where)
    elif isinstance(node, str) and ("{{" in node or "{%" in node):
        if len(node) > LONG:
            found["long"].append(f"{where}: {node[:60]}...")
        if re.search(r"\{%-?\s*for\b", node):
            found["for"].append(f"{where}: {node[:60]}...")


def _counts() -> dict:
    found: dict = {"set_fact": [], "long": [], "for": []}
    for path in _yaml_files():
        _walk(yaml.safe_load(path.read_text()), found, str(path.relative_to(REPO)))
    return found


def test_the_yaml_orchestrates():
    found = _counts()
    assert found["for"] == []
    assert len(found["set_fact"]) <= SET_FACTS_AT_MOST, found["set_fact"]
    assert len(found["long"]) <= LONG_JINJA_AT_MOST, found["long"]


def _references() -> str:
    """Every playbook's and role's text: where a role or a task file would be named."""
    texts = [p.read_text() for p in _yaml_files()]
    texts += [p.read_text() for p in REPO.glob("roles/*/meta/main.yml")]
    return "\n".join(texts)


def test_every_role_and_role_task_file_runs_somewhere():
    text = _references()
    for role in sorted(p.name for p in (REPO / "roles").iterdir() if p.is_dir()):
        assert re.search(rf"aorta\.cluster\.{role}\b", text), f"role {role}: no playbook or role uses it"
        for tasks in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
            if tasks.stem == "main":
                continue
            named = re.search(rf"(tasks_from: {tasks.stem}\b|import_tasks: {tasks.name}\b)", text)
            assert named, f"roles/{role}/tasks/{tasks.name}: nothing imports it"


def _sources() -> list[Path]:
    roots = [REPO / "plugins" / kind for kind in ("action", "plugin_utils", "module_utils")]
    return sorted(p for root in roots for p in root.rglob("*.py") if p.name != "__init__.py")


def test_every_plugin_source_file_has_a_test_file_of_its_own_name():
    missing = []
    for source in _sources():
        relative = source.relative_to(REPO / "plugins")
        test = REPO / "tests" / "unit" / "plugins" / relative.parent / f"test_{source.stem.lstrip('_')}.py"
        if not test.is_file():
            missing.append(f"{relative} -> {test.relative_to(REPO)}")
    assert missing == []


def test_no_function_runs_past_80_lines_unless_it_says_why():
    long = []
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES and "must be" not in (ast.get_docstring(node) or ""):
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
