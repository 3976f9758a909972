# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as users receive it: `ansible-galaxy collection build` makes an artifact that
installs offline into a fresh collections path, whose playbook then runs against the stand-in
cluster from that install (working directory outside the checkout, no checkout ansible.cfg); and
ansible-builder renders the execution environment's build context from the same artifact."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import standin  # tests/standin, put on sys.path by conftest
import yaml
from installed import ARTIFACT, REPO, outside_env, run

BIN = Path(sys.executable).parent


def test_execution_environment_context_renders_from_the_artifact(artifact, tmp_path):
    (tmp_path / "build" / "dist").mkdir(parents=True)
    shutil.copy(artifact, tmp_path / "build" / "dist" / ARTIFACT)
    shutil.copy(REPO / "execution-environment.yml", tmp_path / "execution-environment.yml")
    context = tmp_path / "context"
    created = run(
        [
            "ansible-builder",
            "create",
            "-f",
            "execution-environment.yml",
            "-c",
            str(context),
            "--output-filename",
            "Containerfile",
        ],
        cwd=tmp_path,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "ADD _build/aorta-dist /tmp/aorta-dist" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert (context / "_build" / "aorta-dist" / ARTIFACT).is_file()
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    names = [c["name"] for c in requirements["collections"]]
    # The artifact alone: aorta.cluster depends on no other collection.
    assert names == [f"/tmp/aorta-dist/{ARTIFACT}"]


@pytest.mark.standin
def test_installed_artifact_runs_against_the_standin(artifact, standin_cluster, tmp_path):
    fresh = tmp_path / "collections"
    env = outside_env(tmp_path, fresh)
    installed = run(
        ["ansible-galaxy", "collection", "install", "--offline", "-p", str(fresh), str(artifact)], tmp_path, env
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (fresh / "ansible_collections" / "aorta" / "cluster" / "MANIFEST.json").is_file(), installed.stdout

    # The only aorta.cluster Ansible can see is the fresh install.
    listed = run(["ansible-galaxy", "collection", "list", "aorta.cluster", "--format", "json"], tmp_path, env)
    assert list(json.loads(listed.stdout)) == [str(fresh / "ansible_collections")], listed.stdout

    cluster = standin_cluster.cluster_file(tmp_path, len(standin_cluster.nodes))
    # -i cluster.json from an install, as docs/quickstart.md shows it.
    graph = run(
        ["ansible-inventory", "-i", str(cluster), "--graph"],
        tmp_path,
        dict(env, ANSIBLE_INVENTORY_ENABLED="aorta.cluster.cluster_json,host_list,script,auto,yaml,ini,toml"),
    )
    assert graph.returncode == 0 and "@aorta_head:" in graph.stdout, graph.stderr

    source = tmp_path / "aorta.cluster_json.yml"
    source.write_text(f"plugin: aorta.cluster.cluster_json\npath: {cluster}\n")
    # Rehearsing as docs/quickstart.md says: the stand-in's rehearse.yml, results under the directory
    # ansible-playbook runs from.
    played = run(
        [
            "ansible-playbook",
            "aorta.cluster.aorta_multinode",
            "-i",
            str(source),
            "-e",
            f"@{standin.OUT / 'rehearse.yml'}",
        ],
        tmp_path,
        env,
    )
    assert played.returncode == 0, played.stdout[-3000:] + played.stderr[-2000:]
    (results,) = [path for path in (tmp_path / "aorta_results").iterdir() if path.is_dir()]
    record = json.loads((results / "run.json").read_text())
    assert record["status"] == "COMPLETED"
    # As flat as the checkout's console: no line per node and task (the checkout's ansible.cfg is
    # not read here; the inventory plugin keeps ok and skipped results hidden), the verdict last.
    lines = played.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("ok: [", "skipping: ["))], played.stdout[-3000:]
    assert [line for line in lines if line.startswith("verdict ")] == ["verdict PASS: 4 of 4 thresholds met"]
    assert "DSA is deprecated" not in played.stderr
    # What the run leaves beside run.json: its own console lines and its effective variables.
    assert (results / "console.log").read_text().splitlines()[-1] == "verdict PASS: 4 of 4 thresholds met"
    effective = json.loads((results / "variables.json").read_text())
    assert effective["aorta_base_config"] == "config/standin.yaml" and "aorta_run_id_resolved" not in effective
    # No more lines than the same run from the checkout (its ansible.cfg), the progress lines aside
    # (one per poll: they follow each run's length, not the settings).
    checkout, _run, _results, _seconds = standin_cluster.run(tmp_path, inventory=cluster)
    assert checkout.returncode == 0, checkout.stdout[-3000:]
    assert len(console_lines(played.stdout)) <= len(console_lines(checkout.stdout)), (
        console_lines(played.stdout),
        console_lines(checkout.stdout),
    )
    assert json.loads((results / "combined_traces" / "manifest.json").read_text())["missing_ranks"] == []
    assert (results / "aorta_benchmark_report.json").is_file()
    assert standin_cluster.containers_left() == []


def console_lines(stdout: str) -> list[str]:
    """A run's console lines but its progress lines (``running N/M nodes ...``, one per poll)."""
    return [line for line in stdout.splitlines() if line.strip() and not line.startswith("running ")]


@pytest.fixture(scope="module")
def user_bin(tmp_path_factory) -> Path:
    """A clean venv holding only what the README's install puts there: requirements.txt, from the
    package index (ansible-core and the report's optional packages; not the development tools)."""
    venv = tmp_path_factory.mktemp("user") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "-r", str(REPO / "requirements.txt")], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return venv / "bin"


def test_the_runtime_venv_holds_no_development_tool(user_bin):
    names = subprocess.run([str(user_bin / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True)
    installed = {p["name"].lower() for p in json.loads(names.stdout)}
    assert {"ansible-core", "msgspec", "jinja2"} <= installed
    assert not installed & {"ansible", "ansible-lint", "molecule", "pytest", "mypy", "ansible-builder"}


def as_user(user_bin: Path, cwd: Path, env: dict, *argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """One of the clean venv's commands, run where the user runs it (outside the checkout)."""
    return subprocess.run(
        [str(user_bin / argv[0]), *argv[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# One plugin of each type the collection has, as `ansible-doc -t <type>` names it.
DOCUMENTED = (
    ("module", "aorta.cluster.free_port"),  # a module on its own
    ("module", "aorta.cluster.node_probe"),  # a module its action plugin runs
    ("inventory", "aorta.cluster.cluster_json"),
    ("lookup", "aorta.cluster.cluster_hosts"),
    ("filter", "aorta.cluster.partial_cluster"),
    ("role", "aorta.cluster.preflight"),
)


def test_the_artifact_installs_offline_with_its_dependencies_and_documents_each_plugin_type(
    artifact, user_bin, tmp_path
):
    """A new user on an air-gapped controller: `ansible-galaxy collection install` of the artifact,
    dependencies resolved (no --no-deps) and Galaxy unreachable (--offline), into the clean venv
    that holds ansible-core and no bundled collection; then ansible-doc answers for every plugin
    type from that install alone (no checkout ansible.cfg, working directory outside the checkout)."""
    fresh = tmp_path / "collections"
    env = outside_env(tmp_path, fresh)
    installed = as_user(
        user_bin, tmp_path, env, "ansible-galaxy", "collection", "install", "--offline", "-p", str(fresh), str(artifact)
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    with tarfile.open(artifact) as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["dependencies"] == {}
    # Nothing but aorta.cluster was installed: it needs no other collection.
    namespaces = sorted(p.name for p in (fresh / "ansible_collections").iterdir() if p.is_dir())
    assert namespaces == ["aorta"], namespaces
    assert sorted(p.name for p in (fresh / "ansible_collections" / "aorta").iterdir()) == ["cluster"]

    listed = as_user(user_bin, tmp_path, env, "ansible-doc", "--list", "aorta.cluster")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for kind, name in DOCUMENTED:
        if kind == "module":
            assert name in listed.stdout, (name, listed.stdout)
    for kind, name in DOCUMENTED:
        doc = as_user(user_bin, tmp_path, env, "ansible-doc", "-t", kind, name)
        assert doc.returncode == 0, (kind, name, doc.stdout + doc.stderr)
        assert name in doc.stdout, (kind, name, doc.stdout[:2000])


@pytest.mark.standin
def test_a_users_install_in_a_clean_venv_reports_and_checks(artifact, user_bin, standin_cluster, tmp_path):
    """The README's install, step by step, from a directory outside the checkout: the artifact
    installed with the clean venv's ansible-galaxy (offline: it depends on no other collection),
    then trace_report.yml on real traces and --check against the stand-in cluster."""
    fresh = tmp_path / "collections"
    env = outside_env(tmp_path, fresh)
    env["PATH"] = f"{user_bin}{os.pathsep}{env['PATH']}"

    def user(*argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return as_user(user_bin, tmp_path, env, *argv, timeout=timeout)

    installed = user("ansible-galaxy", "collection", "install", "--offline", "-p", str(fresh), str(artifact))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (fresh / "ansible_collections" / "aorta" / "cluster" / "MANIFEST.json").is_file()

    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(REPO / "tests/fixtures/traces/mi300/bert-small.json.gz", traces / "trace.json.gz")
    report = tmp_path / "report"
    reported = user(
        "ansible-playbook",
        "aorta.cluster.trace_report",
        "-e",
        f"aorta_traces_dir={traces}",
        "-e",
        f"aorta_report_dir={report}",
    )
    assert reported.returncode == 0, reported.stdout[-3000:] + reported.stderr[-2000:]
    parsed = json.loads((report / "aorta_benchmark_report.json").read_text())
    assert parsed["per_rank_summary"][0]["gpu_timeline"]["total_time"] > 0
    assert (report / "report.html").is_file()

    cluster = standin_cluster.cluster_file(tmp_path, 2)
    source = tmp_path / "cluster.aorta.yml"
    source.write_text(f"plugin: aorta.cluster.cluster_json\npath: {cluster.name}\n")
    checked = user(
        "ansible-playbook",
        "aorta.cluster.aorta_multinode",
        "-i",
        str(source),
        "--check",
        "-e",
        f"@{standin.OUT / 'vars.yml'}",
        "-e",
        f"aorta_results_dir={tmp_path / 'check'}",
    )
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-2000:]
    assert checked.stdout.count('"docker_run": "docker run -d --name aorta-benchmark-') == 2
    assert standin_cluster.containers_left() == []
