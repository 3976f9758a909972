# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation as users read it: ansible-doc renders every plugin, module and role of the
collection, README.md's lists of roles, modules and plugins name exactly what the tree holds, and
every relative link in README.md, docs/ and benchmarks/RESULTS.md leads to a file that exists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# What the collection ships, by plugin type: ansible-doc must list each and render it.
SHIPPED = {
    "module": sorted(p.stem for p in (REPO / "plugins" / "modules").glob("[a-z]*.py")),
    "inventory": sorted(p.stem for p in (REPO / "plugins" / "inventory").glob("[a-z]*.py")),
    "lookup": sorted(p.stem for p in (REPO / "plugins" / "lookup").glob("[a-z]*.py")),
    "filter": sorted(p.stem for p in (REPO / "plugins" / "filter").glob("*.yml")),
    "role": sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file()),
}


def ansible_doc(*args: str) -> dict:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), *args, "--json"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    # ansible-core warns about its own internal collections when listing roles; ours must be silent.
    ours = [line for line in proc.stderr.splitlines() if "aorta" in line and ("WARNING" in line or "ERROR" in line)]
    assert ours == [], proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_ansible_doc_lists_and_renders_everything_shipped(kind):
    listed = ansible_doc("-t", kind, "-l", "aorta.cluster")
    names = [f"aorta.cluster.{name}" for name in SHIPPED[kind]]
    assert sorted(listed) == names
    rendered = ansible_doc("-t", kind, *names)
    assert sorted(rendered) == names
    for name, doc in rendered.items():
        if kind == "role":
            # aorta.cluster.defaults documents the vocabulary under `variables`, not `main`: a main
            # entry point would make Ansible validate it on every node (one more task per node).
            entry = doc["entry_points"]["variables" if name == "aorta.cluster.defaults" else "main"]
            assert entry["short_description"] and entry["options"], name
            continue
        assert doc["doc"]["short_description"], name
        assert doc["doc"]["description"], name
        if kind in ("module", "lookup", "filter"):
            assert doc["examples"], name
            assert doc["return"], name


def test_relative_links_in_docs_lead_somewhere():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "RESULTS.md"]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []


# README.md's lists, each a table between `<!-- names: TITLE ... -->` and `<!-- /names -->`; the first
# column of each row names one thing in backquotes.
NAMES_BLOCK = re.compile(r"<!-- names: (?P<title>[^(>]*?)\s*(?:\([^)]*\))?\s*-->\n(?P<body>.*?)<!-- /names -->", re.S)
KINDS = ("role", "module", "action plugin", "inventory", "lookup", "filter")


def readme_tables(text: str) -> dict[str, list[list[str]]]:
    """Each marked table by its title: its rows (header and rule left out) as lists of cells."""
    tables = {}
    for block in NAMES_BLOCK.finditer(text):
        rows = [line.strip() for line in block["body"].splitlines() if line.strip().startswith("|")]
        is_table = len(rows) > 2 and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", rows[1])
        assert is_table, f"README.md: {block['title']}: not a table with a header row"
        # Cells split at every | that is not escaped (\|).
        tables[block["title"]] = [[cell.strip() for cell in re.split(r"(?<!\\)\|", row[1:-1])] for row in rows[2:]]
    return tables


def named(cell: str, where: str) -> str:
    found = re.fullmatch(r"`([a-z0-9_]+)`", cell)
    assert found, f"README.md: {where}: a row's first cell must be one `name`, not {cell!r}"
    return found[1]


def readme_lists(text: str) -> dict[str, list[str]]:
    """What README.md lists, by kind (lists, so that a name given twice shows)."""
    tables = readme_tables(text)
    assert set(tables) == {"roles", "modules and action plugins", "other plugins"}, sorted(tables)
    listed: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for row in tables["roles"]:
        listed["role"].append(named(row[0], "roles"))
    for row in tables["modules and action plugins"]:
        name = named(row[0], "modules and action plugins")
        listed["module"].append(name)
        assert re.match(r"(yes|no)\b", row[1]), f"README.md: module {name}: the action plugin column says yes or no"
        if row[1].startswith("yes"):
            listed["action plugin"].append(name)
    for row in tables["other plugins"]:
        kind = row[1].strip("`")
        assert kind in ("inventory", "lookup", "filter"), f"README.md: other plugins: {row[0]}: unknown type {row[1]!r}"
        listed[kind].append(named(row[0], "other plugins"))
    return listed


def tree() -> dict[str, set[str]]:
    """What the collection holds, by the kind README.md lists it as."""
    plugins = REPO / "plugins"
    return {
        "role": {
            p.name
            for p in (REPO / "roles").iterdir()
            if (p / "tasks" / "main.yml").is_file() or (p / "defaults" / "main.yml").is_file()
        },
        "module": {p.stem for p in (plugins / "modules").glob("[a-z]*.py")},
        "action plugin": {p.stem for p in (plugins / "action").glob("[a-z]*.py")},
        "inventory": {p.stem for p in (plugins / "inventory").glob("[a-z]*.py")},
        "lookup": {p.stem for p in (plugins / "lookup").glob("[a-z]*.py")},
        # Every filter has its documentation sidecar, named after it.
        "filter": {p.stem for p in (plugins / "filter").glob("*.yml")},
    }


def differences(shipped: dict[str, set[str]], listed: dict[str, list[str]]) -> list[str]:
    """One line per name README.md lacks, lists twice, or lists without the tree holding it."""
    problems = []
    for kind in KINDS:
        names = listed[kind]
        problems += [f"{kind} listed twice in README.md: {n}" for n in sorted({n for n in names if names.count(n) > 1})]
        problems += [f"{kind} missing from README.md: {n}" for n in sorted(shipped[kind] - set(names))]
        problems += [f"{kind} in README.md but not in the tree: {n}" for n in sorted(set(names) - shipped[kind])]
    return problems


def test_readme_lists_every_role_module_and_plugin_the_tree_holds_and_no_other():
    problems = differences(tree(), readme_lists((REPO / "README.md").read_text()))
    assert problems == [], "\n".join(problems)


# A task's action: `aorta.cluster.<module>:` at the start of a line (a `- ` item or a key of one).
TASK_MODULE = re.compile(r"^\s*(?:-\s+)?aorta\.cluster\.([a-z0-9_]+):", re.M)


def test_readme_names_the_modules_each_role_runs():
    """The roles table's last column: the modules of this collection the role's tasks call."""
    wrong = []
    for row in readme_tables((REPO / "README.md").read_text())["roles"]:
        role = named(row[0], "roles")
        said = sorted(re.findall(r"`([a-z0-9_]+)`", row[-1]))
        texts = [f.read_text() for f in (REPO / "roles" / role / "tasks").glob("*.yml")]
        called = sorted({m for text in texts for m in TASK_MODULE.findall(text)})
        if said != called:
            wrong.append(f"README.md: role {role}: says it runs {said}, its tasks call {called}")
    assert wrong == [], "\n".join(wrong)


def test_the_readme_check_names_what_is_missing_extra_or_twice():
    text = """
<!-- names: roles (checked) -->
| role | step |
|---|---|
| `preflight` | probe |
| `preflight` | again |
| `gone` | a role that is no more |
<!-- /names -->
<!-- names: modules and action plugins -->
| module | action plugin | what |
|:--|---|---|
| `say` | yes: on the controller | a \\| in a cell |
| `free_port` | no | a port |
<!-- /names -->
<!-- names: other plugins -->
| plugin | type | what |
|---|---|---|
| `cluster_json` | inventory | the cluster file |
| `master_addr` | filter | the address |
<!-- /names -->
"""
    shipped = {
        "role": {"preflight", "teardown"},
        "module": {"say", "free_port", "node_end"},
        "action plugin": {"say", "node_end"},
        "inventory": {"cluster_json"},
        "lookup": {"cluster_hosts"},
        "filter": {"master_addr"},
    }
    assert differences(shipped, readme_lists(text)) == [
        "role listed twice in README.md: preflight",
        "role missing from README.md: teardown",
        "role in README.md but not in the tree: gone",
        "module missing from README.md: node_end",
        "action plugin missing from README.md: node_end",
        "lookup missing from README.md: cluster_hosts",
    ]
