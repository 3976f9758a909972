# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test helpers: where the read-only fixtures are, the repository root, and how tests run
a module (a child Python process given its arguments as JSON, as Ansible runs it) or a task
(ansible-playbook on localhost: the action plugin in the controller, its module "on the node")."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.plugins.loader import init_plugin_loader

REPO = Path(__file__).resolve().parents[1]
# Ansible's collection finder must own the ansible_collections namespace before any test imports
# from it, so plugins load the way ansible-playbook loads them (`make venv` makes the link).
init_plugin_loader([str(REPO / ".collections")])
# The real traces and CVS cluster files the tests read travel with the repository (licences and
# provenance beside them), so a clone alone passes `make test`.
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def run_module():
    def run(module, args, check=False):
        payload = {"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check)}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(
            [sys.executable, str(Path(module.__file__))],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        return json.loads(out.stdout)

    return run


BIN = Path(sys.executable).parent


@pytest.fixture
def play(tmp_path):
    def run(task: dict, extra_vars: dict | None = None) -> tuple[int, dict]:
        playbook = tmp_path / "play.yml"
        task = dict(task, register="aorta_out", ignore_errors=True)
        show = {"ansible.builtin.copy": {"content": "{{ aorta_out | to_json }}", "dest": str(tmp_path / "out.json")}}
        playbook.write_text(
            yaml.safe_dump(
                [{"hosts": "localhost", "gather_facts": False, "connection": "local", "tasks": [task, show]}]
            )
        )
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        argv = [str(BIN / "ansible-playbook"), str(playbook), "-i", "localhost,"]
        argv += ["-e", json.dumps({"ansible_python_interpreter": sys.executable, **(extra_vars or {})})]
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        out = tmp_path / "out.json"
        assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
        return proc.returncode, json.loads(out.read_text())

    return run


@pytest.fixture
def cluster_play(tmp_path):
    """A play over a "cluster" of local hosts (``localhost`` the head, then ``127.0.0.1``, ...),
    each node step's result saved as ``out_<host>.json``; the node steps read their aorta_*
    variables themselves, with the role aorta.cluster.defaults as the real play lists it."""

    def run(tasks: list, nodes: int = 2, host_vars: dict | None = None, extra_vars: dict | None = None, check=False):
        names = ["localhost"] + [f"127.0.0.{i + 1}" for i in range(nodes - 1)]
        hosts = {
            name: {"ansible_connection": "local", "aorta_node_rank": rank, "aorta_vpc_ip": "127.0.0.1"}
            | (host_vars or {}).get(name, {})
            for rank, name in enumerate(names)
        }
        inventory = {
            "all": {
                "children": {
                    "aorta_nodes": {"hosts": hosts},
                    "aorta_head": {"hosts": {names[0]: {}}},
                    "aorta_workers": {"hosts": {name: {} for name in names[1:]}},
                }
            }
        }
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
        save = {
            "ansible.builtin.copy": {
                "content": "{{ lookup('ansible.builtin.vars', item, default={}) | to_json }}",
                "dest": str(tmp_path) + "/{{ item }}_{{ inventory_hostname }}.json",
            },
            "loop": [task["register"] for task in tasks],
            "check_mode": False,
        }
        play = {
            "hosts": "aorta_nodes",
            "gather_facts": False,
            "roles": [{"role": "aorta.cluster.defaults"}],
            "tasks": [dict(task, ignore_errors=True) for task in tasks] + [save],
        }
        (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        argv = [str(BIN / "ansible-playbook"), str(tmp_path / "play.yml"), "-i", str(tmp_path / "inventory.yml")]
        argv += ["-e", json.dumps({"ansible_python_interpreter": sys.executable, **(extra_vars or {})})]
        argv += ["--check"] if check else []
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
        out = {}
        for task in tasks:
            for name in names:
                path = tmp_path / f"{task['register']}_{name}.json"
                assert path.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
                out.setdefault(task["register"], {})[name] = json.loads(path.read_text())
        return proc, out

    return run


# Synthetic gloo ranks and a combined_traces tree of them, shared by the analysis, report and
# trace_parse tests (a fixture: pytest does not put tests/ on sys.path for plain imports).
def step(name, ts, dur, cat="user_annotation", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def synthetic_rank(rank, world, compute_ms, steps=4, step_ms=100.0):
    """A gloo rank: every step lasts step_ms (synchronous), compute_ms of it computing, the rest
    waiting in the all-reduce for the slowest rank."""
    events, t = [], 0.0
    for i in range(steps):
        events.append(step(f"ProfilerStep#{i}", t, step_ms * 1000))
        events.append(step("standin_compute", t, compute_ms * 1000))
        events.append(step("gloo:all_reduce", t + compute_ms * 1000, (step_ms - compute_ms) * 1000, tid=2))
        t += step_ms * 1000
    return {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world}, "traceEvents": events}


def combined_tree(tmp_path, compute_by_rank, ranks_per_node=2, bad_file=True, drop=()):
    world = len(compute_by_rank)
    root = tmp_path / "combined_traces"
    names = {}
    for rank, compute in enumerate(compute_by_rank):
        if rank in drop:
            continue
        node = rank // ranks_per_node
        names[node] = f"gpu-{chr(97 + node)}"
        path = root / f"node_{node}" / "torch_profiler" / f"rank{rank}" / "trace.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as handle:
            json.dump(synthetic_rank(rank, world, compute), handle)
    if bad_file:
        (root / "node_0" / "torch_profiler" / "broken.json").write_text('{"traceEvents": [')
    manifest = {"nodes": [{"rank": n, "name": name} for n, name in names.items()]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.fixture(name="combined_tree")
def combined_tree_fixture():
    return combined_tree
