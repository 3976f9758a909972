# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection says one thing everywhere: the licence the headers cite exists, and every role
claims the ansible-core versions the collection is tested with."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_the_licence_text_the_headers_cite_is_there():
    assert "GNU GENERAL PUBLIC LICENSE" in (REPO / "LICENSES" / "GPL-3.0-or-later.txt").read_text()[:200]
    cited = {
        match
        for path in (REPO / "plugins").rglob("*.py")
        for match in re.findall(r"see (LICENSES/\S+) or", path.read_text())
    }
    assert cited == {"LICENSES/GPL-3.0-or-later.txt"}


def test_roles_claim_the_versions_the_collection_requires():
    required = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    minimum = re.match(r">=\s*(\d+\.\d+)", required).group(1)
    for meta in (REPO / "roles").glob("*/meta/main.yml"):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"] == minimum, meta


def test_no_two_test_files_share_a_basename():
    """pytest imports test files by basename (rootdir-relative packages aside): a second
    test_diagnosis.py under tests/integration stopped the whole CI collection once."""
    seen: dict = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_the_node_side_summary_does_not_ship_the_renderer():
    """trace_summary runs on every node: what it imports (Ansible bundles it) stays the analysis."""
    utils = REPO / "plugins" / "module_utils"
    pattern = re.compile(r"plugins\.module_utils\.(\w+)(?:\._(\w+)| import ([\w, ]+))")
    todo, shipped = [REPO / "plugins" / "modules" / "trace_summary.py"], set()
    while todo:
        text = todo.pop().read_text()
        for package, single, several in pattern.findall(text):
            for name in [single] if single else [n.strip().lstrip("_") for n in several.split(",")]:
                path = utils / package / f"_{name}.py"
                if name and f"{package}/{name}" not in shipped and path.exists():
                    shipped.add(f"{package}/{name}")
                    todo.append(path)
    # _traces: which of the node's files are the run's, as trace_pack takes them (stdlib, node-side);
    # _node_summary: the summary file the node writes (aorta_collect_traces sample, none).
    analysis = {"analysis", "decode", "intervals", "layout", "node_summary", "timeline", "traces"}
    assert shipped == {f"trace_analysis/{name}" for name in analysis}, shipped


def test_module_utils_ship_the_standard_library_only():
    """README's layout says module_utils (shipped to the nodes) is stdlib only: no Jinja2, no
    controller-only plugin_utils (the report's pages moved out for that), no third-party import
    that is not guarded."""
    bad = []
    for path in sorted((REPO / "plugins" / "module_utils").rglob("*.py")):
        text = path.read_text()
        if re.search(r"^\s*(import jinja2|from jinja2)|plugins\.plugin_utils", text, re.M):
            bad.append(str(path.relative_to(REPO)))
    assert bad == []


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split("."))


def test_no_plugin_claims_a_version_after_the_collections_own():
    """version_added names a release: none may be later than the one galaxy.yml builds."""
    release = _version(yaml.safe_load((REPO / "galaxy.yml").read_text())["version"])
    claimed = {}
    for path in [*(REPO / "plugins").rglob("*.py"), *(REPO / "plugins").rglob("*.yml")]:
        for match in re.findall(r"^\s*version_added:\s*['\"]?([0-9.]+)", path.read_text(), flags=re.MULTILINE):
            claimed[str(path.relative_to(REPO))] = match
    assert len(claimed) >= 20, claimed  # every module, filter, inventory and lookup says one
    assert {path: v for path, v in claimed.items() if _version(v) > release} == {}


def test_the_readmes_layout_names_every_folder_of_the_controllers_and_the_nodes_code():
    """A newcomer reads the pipeline from README.md's layout table: each concern folder of
    plugin_utils and module_utils has its row (or is named in its parent's), and no row names a
    folder the tree does not hold."""
    readme = (REPO / "README.md").read_text()
    folders = {
        f"{kind}/{path.name}/"
        for kind in ("plugin_utils", "module_utils")
        for path in (REPO / "plugins" / kind).iterdir()
        if path.is_dir() and path.name != "__pycache__"
    }
    assert {
        folder for folder in folders if f"`{folder}`" not in readme and f"`{folder.split('/')[1]}/`" not in readme
    } == set()
    named = set(re.findall(r"`plugin_utils/(\w+)/`", readme))
    assert {f"plugin_utils/{name}/" for name in named} <= folders
    # Each plugin_utils folder in one row of its own.
    rows = [line for line in readme.splitlines() if line.startswith("| `plugin_utils/")]
    assert sorted(re.match(r"\| `(plugin_utils/\w+/)`", row).group(1) for row in rows) == sorted(
        f for f in folders if f.startswith("plugin_utils/")
    )


# The three commands a user needs once a run is in flight or over, by its id (issue 53's finding 7).
RUN_COMMANDS = ("stop", "watch", "trace_collect")


def test_quickstart_and_troubleshooting_say_how_to_stop_re_attach_and_re_collect_a_run():
    for doc in ("quickstart.md", "troubleshooting.md"):
        text = (REPO / "docs" / doc).read_text()
        for playbook in RUN_COMMANDS:
            line = f"ansible-playbook aorta.cluster.{playbook} -i cluster.aorta.yml -e aorta_run_id=<id>"
            assert line in text, (doc, line)
            # The playbook the command names ships, at the name the collection serves it under.
            assert (REPO / "playbooks" / f"{playbook}.yml").is_file()
        assert "not `--limit`" in text, doc  # the way to pick nodes that works, and the one that does not
