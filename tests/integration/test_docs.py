# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation as users read it: ansible-doc renders every plugin, module and role of the
collection, and every relative link in README.md and docs/ leads to a file that exists."""

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
    "inventory": ["cluster_json"],
    "lookup": ["cluster_hosts"],
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
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []
