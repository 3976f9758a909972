# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in cluster as a pytest fixture: started once per session, removed at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
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

    def playbook(self, *args: str, inventory: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        return self._run(
            "ansible-playbook",
            "aorta_multinode.yml",
            "-i",
            str(inventory or self.cluster_json),
            "-e",
            f"@{self.vars_yml}",
            *args,
            timeout=timeout,
        )

    def cluster_file(self, tmp_path: Path, nodes: int, vpc_ip: dict | None = None) -> Path:
        """A cluster.json holding the first ``nodes`` nodes, with some vpc_ip values replaced."""
        data = json.loads(self.cluster_json.read_text())
        keys = list(data["node_dict"])[:nodes]
        data["node_dict"] = {
            k: dict(data["node_dict"][k], **({"vpc_ip": vpc_ip[k]} if k in (vpc_ip or {}) else {})) for k in keys
        }
        data["head_node_dict"] = {"mgmt_ip": keys[0]}
        path = tmp_path / f"{nodes}-{uuid.uuid4().hex[:6]}-cluster.json"
        path.write_text(json.dumps(data))
        return path

    def run(self, tmp_path: Path, inventory: Path | None = None, **extra_vars):
        """aorta_multinode.yml with ``extra_vars``; returns (process, run.json or None, results dir, seconds)."""
        results = tmp_path / f"results-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        proc = self.playbook("-e", json.dumps({"aorta_results_dir": str(results), **extra_vars}), inventory=inventory)
        elapsed = time.monotonic() - started
        # Kept beside the results (pytest keeps the last runs' tmp_path): a failure seen once is a bug.
        (tmp_path / f"{results.name}.ansible.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        run_json = results / "run.json"
        return proc, json.loads(run_json.read_text()) if run_json.exists() else None, results, elapsed

    def containers_left(self) -> list[str]:
        """Containers of any aorta run still on any node."""
        return [
            line
            for i in range(len(self.nodes))
            for line in self.node_exec(i, "docker", "ps", "-a", "--filter", "label=aorta.cluster.run", "-q").split()
        ]

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
            ["docker", *kind.split(), "-q", "--filter", f"label={standin.LABEL}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        found += [f"{kind}:{item}" for item in out]
    return found


@pytest.fixture(scope="session")
def standin_cluster():
    # Three nodes: runs on 3 use them all, runs on 2 use a cluster file listing the first two.
    state = standin.up(int(os.environ.get("AORTA_STANDIN_NODES", "3")))
    yield Cluster(state)
    standin.down()
    left = leftovers()
    assert not left, f"stand-in down left {left}"
    assert not standin.OUT.exists()
    images = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(images) <= {"aorta-standin-node", "aorta-standin-workload"}, images  # only the cache


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
