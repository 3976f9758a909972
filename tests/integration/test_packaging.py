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

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
ARTIFACT = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"


def run(argv, cwd, env=None, timeout=900):
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        cwd=cwd,
        env=env or os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def outside_env(tmp: Path, collections: Path) -> dict:
    """No checkout ansible.cfg, no checkout collections path: only the fresh install (and the
    collections the ansible package bundles, as on any machine with `pip install ansible`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    config = tmp / "ansible.cfg"
    config.write_text("[defaults]\nforks = 32\n")
    env.update(ANSIBLE_CONFIG=str(config), ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1")
    return env


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    built = run(["ansible-galaxy", "collection", "build", "--output-path", str(dist), str(REPO)], cwd=dist)
    assert built.returncode == 0, built.stderr
    path = dist / ARTIFACT
    with tarfile.open(path) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and "meta/execution-environment.yml" in names
    assert "playbooks/aorta_multinode.yml" in names and "plugins/lookup/cluster_hosts.py" in names
    assert "LICENSES/GPL-3.0-or-later.txt" in names  # the text every file header cites
    # Nothing of the developer's machine goes into the artifact.
    for unwanted in (".venv/", "build/", ".collections/", "benchmarks/", "tests/output/"):
        assert not any(name.startswith(unwanted) for name in names), unwanted
    return path


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
    assert f"/tmp/aorta-dist/{ARTIFACT}" in names and "ansible.posix" in names


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

    cluster = standin_cluster.cluster_file(tmp_path, 2)
    # -i cluster.json from an install, as docs/quickstart.md shows it.
    graph = run(
        ["ansible-inventory", "-i", str(cluster), "--graph"],
        tmp_path,
        dict(env, ANSIBLE_INVENTORY_ENABLED="aorta.cluster.cluster_json,host_list,script,auto,yaml,ini,toml"),
    )
    assert graph.returncode == 0 and "@aorta_head:" in graph.stdout, graph.stderr

    source = tmp_path / "aorta.cluster_json.yml"
    source.write_text(f"plugin: aorta.cluster.cluster_json\npath: {cluster}\n")
    results = tmp_path / "results"
    played = run(
        [
            "ansible-playbook",
            "aorta.cluster.aorta_multinode",
            "-i",
            str(source),
            "-e",
            f"@{standin.OUT / 'vars.yml'}",
            "-e",
            f"aorta_results_dir={results}",
        ],
        tmp_path,
        env,
    )
    assert played.returncode == 0, played.stdout[-3000:] + played.stderr[-2000:]
    record = json.loads((results / "run.json").read_text())
    assert record["status"] == "COMPLETED"
    assert json.loads((results / "combined_traces" / "manifest.json").read_text())["missing_ranks"] == []
    assert (results / "aorta_benchmark_report.json").is_file()
    assert standin_cluster.containers_left() == []
