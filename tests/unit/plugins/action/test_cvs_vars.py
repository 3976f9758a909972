# SPDX-License-Identifier: GPL-3.0-or-later
"""cvs_vars maps a CVS aorta_benchmark.yaml in the controller's Python: the variables in a scratch
file include_vars reads (under --check too), the unused keys said, an unknown key one line naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.aorta.cluster.plugins.action.cvs_vars import write_vars

REPO = Path(__file__).resolve().parents[4]
SHOWN = "{{ {'image': aorta_docker_image, 'gpus': aorta_gpus_per_node, 'names': mapped.names} }}"
BIN = Path(sys.executable).parent


def test_write_vars_is_a_private_yaml_file(tmp_path):
    path = write_vars({"aorta_gpus_per_node": 4, "aorta_docker_image": "img:1"})
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert yaml.safe_load(Path(path).read_text()) == {"aorta_gpus_per_node": 4, "aorta_docker_image": "img:1"}
    finally:
        os.unlink(path)


def _play(tmp_path, cvs: dict, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "aorta_benchmark.yaml").write_text(yaml.safe_dump(cvs))
    tasks = [
        {"name": "map", "aorta.cluster.cvs_vars": {"src": "aorta_benchmark.yaml"}, "register": "mapped"},
        {"name": "use", "ansible.builtin.include_vars": {"file": "{{ mapped.path }}"}},
        # say: a controller-side action, so no module needs the host's Python.
        {"name": "show", "aorta.cluster.say": {"msg": "SHOWN {{ SHOWN | to_json }}"}, "vars": {"SHOWN": SHOWN}},
    ]
    book = tmp_path / "cvs.yml"
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(book), "-i", "localhost,", "-c", "local", *extra]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_cvs_file_becomes_variables_and_the_unused_keys_are_said(tmp_path):
    cvs = {"gpus_per_node": 4, "docker": {"image": "img:1"}, "rccl": {"clone_url": "https://x"}}
    proc = _play(tmp_path, cvs, "-e", json.dumps({"aorta_docker_image": "cli:2"}))
    assert proc.returncode == 0, proc.stdout[-2000:]
    shown = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("SHOWN "))[6:])
    # -e wins over the mapped value, as over any include_vars.
    assert shown == {"image": "cli:2", "gpus": 4, "names": ["aorta_docker_image", "aorta_gpus_per_node"]}
    assert "aorta_benchmark.yaml: not used: rccl.clone_url: not used by the launch" in proc.stdout


def test_an_unknown_key_fails_naming_the_file_and_the_key(tmp_path):
    proc = _play(tmp_path, {"docker": {"imag": "x"}})
    assert proc.returncode != 0
    assert "aorta_benchmark.yaml: docker.imag: unknown CVS key" in proc.stdout
    assert "SHOWN" not in proc.stdout


def test_a_missing_file_is_named(tmp_path):
    book = tmp_path / "cvs.yml"
    tasks = [{"name": "map", "aorta.cluster.cvs_vars": {"src": "nowhere.yaml"}}]
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(book), "-i", "localhost,", "-c", "local"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "aorta_cvs_config: nowhere.yaml: no such file" in proc.stdout
