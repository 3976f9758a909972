# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation as users read it: ansible-doc renders every plugin, module and role of the
collection, README.md's lists of roles, modules and plugins name exactly what the tree holds, every
relative link in README.md, docs/ and benchmarks/RESULTS.md leads to a file that exists, and
docs/results.md's junit.xml examples, its "no comparable run" reason and the set_stats keys it and
docs/awx.md list are what the code writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.action import trace_parse
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _baseline
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import check_thresholds
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import (
    _diagnosis,
    _fingerprint,
    _judging,
    _junit,
    _outcome,
    _record,
    _run,
)

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


# docs/results.md's junit.xml, "no comparable run" and set_stats, as the code makes them.
RESULTS_MD = REPO / "docs" / "results.md"
SAMPLE_RUN = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
RUN_DATA = REPO / "tests" / "unit" / "plugins" / "plugin_utils" / "results" / "run_data"


def section(text: str, title: str) -> str:
    """The part of a page under ``## title``, up to the next ``## ``."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def xml_blocks(text: str) -> list[str]:
    return re.findall(r"```xml\n(.*?)```", text, re.S)


def not_shown(example: str, document: str) -> list[str]:
    """The lines of ``example`` that ``document`` does not hold, in the example's order, indentation
    aside: a line ``...`` stands for lines left out, ``...`` inside a line for text left out."""
    lines = [line.strip() for line in document.splitlines()]
    at, missing = 0, []
    for shown in (line.strip() for line in example.splitlines()):
        if shown in ("", "..."):
            continue
        pattern = re.compile(".*?".join(re.escape(part) for part in shown.split("...")))
        found = next((i for i in range(at, len(lines)) if pattern.fullmatch(lines[i])), None)
        if found is None:
            missing.append(shown)
        else:
            at = found + 1
    return missing


def healthy_junit() -> str:
    """junit.xml of the sample run with a report whose CVS thresholds (the four defaults) hold and
    which names nobody, as run_outcome writes it."""
    performance = {
        "avg_iteration_time_ms": 33.5,
        "std_iteration_time_us": 412.0,
        "avg_compute_ratio": 0.62,
        "avg_overlap_ratio": 0.05,
    }
    checks = check_thresholds(performance, DEFAULTS["aorta_expected_results"])
    assert len(checks) == 4 and all(check["passed"] for check in checks)
    report = {
        "validation": {"passed": True, "checks": checks},
        "slow_nodes": [],
        "stragglers": [],
        "slow_links": [],
        "straggler_test": {"verdict": "none stands out", "node_test": {"verdict": "no node stands out"}},
    }
    return _junit.junit_xml(SAMPLE_RUN, report)


def killed_junit(tmp_path: Path) -> str:
    """junit.xml of the sample run after its last node's workload was killed (exit 137, no root cause
    in its log) and the head's ranks lost their peer (a real torchrun log); status, diagnosis and
    verdict made as run_record and run_outcome make them; no report."""
    run = json.loads(json.dumps(SAMPLE_RUN))
    head, last = run["nodes"]
    (tmp_path / "logs").mkdir()
    for row, log, code in ((head, (RUN_DATA / "torchrun_peer_failure.log").read_text(), 1), (last, "", 137)):
        (tmp_path / "logs" / f"{row['name']}.log").write_text(log)
        row.update(state="failed", exit_code=code, failure=_run.torchrun_failure(log))
    run.update(_run.run_status(run["nodes"]))
    assert (run["status"], run["first_failure"]) == ("FAILED", last["name"])
    run["diagnosis"] = _diagnosis.diagnose_run(str(tmp_path), run["status"], run["nodes"], 2)
    run["verdict"] = _outcome.judge(run, None)
    return _junit.junit_xml(run, None)


def test_the_junit_examples_are_what_the_code_writes(tmp_path):
    healthy, killed = xml_blocks(section(RESULTS_MD.read_text(), "junit.xml"))
    assert "<testsuites " in healthy and "stopped after node " in killed
    assert not_shown(healthy, healthy_junit()) == []
    assert not_shown(killed, killed_junit(tmp_path)) == []


def test_the_example_check_names_a_line_the_document_lacks():
    document = '<a x="1">\n  <b y="long text here" />\n</a>\n'
    assert not_shown('<a x="1">\n...\n<b y="long ..." />\n</a>', document) == []
    assert not_shown('<b y="long ..." />\n<a x="1">', document) == ['<a x="1">']
    assert not_shown('<b y="short" />', document) == ['<b y="short" />']


def test_the_no_comparable_run_example_is_what_auto_says(tmp_path):
    """Two earlier COMPLETED runs of another image: auto compares with neither and says why, in the
    words results.md quotes."""
    quoted = re.search(r'"(no comparable run: 2 earlier runs, [^"]*)"', " ".join(RESULTS_MD.read_text().split()))
    assert quoted, "results.md quotes no 'no comparable run: 2 earlier runs, ...' reason"
    for age in (1, 2):
        other = json.loads(json.dumps(SAMPLE_RUN))
        other["run_id"] = f"earlier-{age}"
        other["started_epoch"] -= 3600 * age
        other["context"]["image_id"] = "sha256:" + "0" * 64
        (tmp_path / other["run_id"]).mkdir()
        (tmp_path / other["run_id"] / "run.json").write_text(json.dumps(other))
    path, reason = _judging.choose_baseline(str(tmp_path), SAMPLE_RUN)
    assert path is None
    pattern = re.escape(quoted[1]).replace(re.escape("<fingerprint id>"), "[0-9a-f]{12}")
    assert re.fullmatch(pattern.replace(re.escape("<run id>"), "earlier-1"), reason), reason


def documented_stats(text: str) -> set[str]:
    """The keys in the first column of results.md's set_stats table."""
    rows = [line for line in section(text, "What AWX sees (set_stats)").splitlines() if line.startswith("| `")]
    return {key for row in rows for key in re.findall(r"`(aorta_\w+)`", row.split("|")[1])}


def test_the_set_stats_keys_the_docs_list_are_those_the_run_sets():
    recorded = _record.awx_stats("r", "/r", {"status": "COMPLETED", "failed_nodes": []}, {}, {}, {})
    reported = trace_parse.awx_stats({"report": "/r/aorta_benchmark_report.json"})
    finished = _outcome.awx_stats({"verdict": "PASS", "reasons": []})
    keys = set(recorded["data"]) | set(reported["data"]) | set(finished["data"])
    assert documented_stats(RESULTS_MD.read_text()) == keys
    awx = (REPO / "docs" / "awx.md").read_text()
    listed = awx[awx.index("job's artifacts (`set_stats`, each key in") : awx.index("Nothing secret is in either")]
    assert set(re.findall(r"`(aorta_\w+)`", listed)) == keys


def test_the_keys_left_out_of_the_fingerprint_and_who_stands_out_are_said_as_the_code_has_them():
    results = " ".join((REPO / "docs" / "results.md").read_text().split())
    variables = " ".join((REPO / "docs" / "variables.md").read_text().split())
    ignore_row = next(line for line in variables.splitlines() or [variables] if "aorta_baseline_ignore" in line)
    for key in _fingerprint.NEUTRAL_KEYS:
        assert f"`{key}`" in results, key
        assert f"`{key}`" in ignore_row, key
    assert f'"{_baseline.NOBODY_STANDS_OUT}"' in results
    assert _baseline.STANDS_OUT_SHOWN == 3 and "the first three and how many more" in results
