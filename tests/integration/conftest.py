# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in cluster as a pytest fixture: started once per session, removed at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "standin"))

import standin  # noqa: E402  (lives beside the tests, not in a package)

BIN = Path(sys.executable).parent


class Cluster:
    """A running stand-in cluster and helpers to drive it the way a user would."""

    def __init__(self, state: dict) -> None:
        self.state = state
        self.nodes = state["nodes"]
        self.cluster_json = standin.OUT / "cluster.json"
        self.vars_yml = standin.OUT / "vars.yml"

    def ansible(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return self._run("ansible", "-i", str(self.cluster_json), "-e", f"@{self.vars_yml}", *args, timeout=timeout)

    def playbook(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return self._run(
            "ansible-playbook", "aorta_multinode.yml", "-i", str(self.cluster_json), "-e", f"@{self.vars_yml}", *args,
            timeout=timeout,
        )  # fmt: skip

    def _run(self, tool: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
        return subprocess.run(
            [str(BIN / tool), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def node_exec(self, index: int, *argv: str, check: bool = True) -> str:
        result = subprocess.run(
            ["docker", "exec", self.nodes[index]["container"], *argv], capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{argv} on node {index}: {result.stderr}")
        return result.stdout


def leftovers() -> list[str]:
    found = []
    for kind in ("ps", "network ls"):
        out = subprocess.run(
            ["docker", *kind.split(), "-q", "--filter", f"label={standin.LABEL}"], capture_output=True, text=True,
            check=True,
        ).stdout.split()  # fmt: skip
        found += [f"{kind}:{item}" for item in out]
    return found


@pytest.fixture(scope="session")
def standin_cluster():
    state = standin.up(int(os.environ.get("AORTA_STANDIN_NODES", "2")))
    yield Cluster(state)
    standin.down()
    left = leftovers()
    assert not left, f"stand-in down left {left}"
    assert not standin.OUT.exists()
    images = subprocess.run(["docker", "images", "--format", "{{.Repository}}"], capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    assert set(images) <= {"aorta-standin-node", "aorta-standin-workload"}, images  # only the cache


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
