# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as users receive it: the artifact `ansible-galaxy collection build` makes, and the
environment of a user who installed it (no checkout ansible.cfg, no checkout collections path).
Shared by the packaging tests and the dead-node table (conftest's ``artifact`` fixture)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

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


def build_artifact(dist: Path) -> Path:
    """The artifact built into ``dist``, checked: what users need is in it, the developer's machine is not."""
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


def install(artifact: Path, tmp: Path) -> dict:
    """``artifact`` installed offline into a fresh collections path under ``tmp``: a user's environment."""
    fresh = tmp / "collections"
    env = outside_env(tmp, fresh)
    installed = run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(fresh), str(artifact)], tmp, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (fresh / "ansible_collections" / "aorta" / "cluster" / "MANIFEST.json").is_file(), installed.stdout
    return env
