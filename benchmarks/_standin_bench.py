"""Helpers shared by the stand-in benchmarks (not a benchmark itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "standin"))

import standin  # noqa: E402  (beside the tests, not a package)

BIN = Path(sys.executable).parent


def playbook(
    playbook_path: str, inventory: Path, *extra: str, timeout: float = 900, task_log: Path | None = None
) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    if task_log is not None:
        # One JSON line per task result and host, with its start and end (callback_plugins/aorta_task_log.py).
        env.update(
            ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
            ANSIBLE_CALLBACKS_ENABLED="aorta_task_log",
            AORTA_TASK_LOG=str(task_log),
        )
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            playbook_path,
            "-i",
            str(inventory),
            "-e",
            f"@{standin.OUT / 'vars.yml'}",
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def subset(nodes: int, path: Path, out: Path = standin.OUT) -> Path:
    """A cluster.json of the first ``nodes`` nodes of the stand-in that wrote ``out``."""
    data = json.loads((out / "cluster.json").read_text())
    keys = list(data["node_dict"])[:nodes]
    data["node_dict"] = {k: data["node_dict"][k] for k in keys}
    data["head_node_dict"] = {"mgmt_ip": keys[0]}
    path.write_text(json.dumps(data))
    return path


def ssh_argv(mgmt_ip: str) -> list[str]:
    return [
        "ssh",
        "-i",
        str(standin.OUT / "id_ed25519"),
        "-o",
        f"UserKnownHostsFile={standin.OUT / 'known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        f"root@{mgmt_ip}",
    ]


def node_exec(container: str, *argv: str) -> str:
    return subprocess.run(["docker", "exec", container, *argv], capture_output=True, text=True, check=True).stdout
