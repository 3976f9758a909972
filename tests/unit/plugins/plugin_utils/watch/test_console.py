# SPDX-License-Identifier: GPL-3.0-or-later
"""The console's defaults: ok and skipped results hidden unless the user's environment or ansible.cfg
chose, and then never touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console

REPO = Path(__file__).resolve().parents[5]


def test_without_a_choice_ok_and_skipped_results_are_hidden():
    environ: dict[str, str] = {}
    assert _console.quiet_by_default(environ, None) == ["ANSIBLE_DISPLAY_OK_HOSTS", "ANSIBLE_DISPLAY_SKIPPED_HOSTS"]
    assert environ == {"ANSIBLE_DISPLAY_OK_HOSTS": "False", "ANSIBLE_DISPLAY_SKIPPED_HOSTS": "False"}


def test_the_users_environment_and_ansible_cfg_win(tmp_path):
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\ndisplay_skipped_hosts = True\n")
    environ = {"ANSIBLE_DISPLAY_OK_HOSTS": "True"}
    assert _console.quiet_by_default(environ, str(config)) == []
    assert environ == {"ANSIBLE_DISPLAY_OK_HOSTS": "True"}


def test_an_unreadable_or_sectionless_config_leaves_the_environment_to_decide(tmp_path):
    config = tmp_path / "ansible.cfg"
    config.write_text("not an ini file [")
    assert _console.user_set(str(config)) == set()
    assert _console.user_set(str(tmp_path / "missing.cfg")) == set()


def test_an_installed_collections_run_hides_ok_results_through_the_inventory_plugin(tmp_path):
    """ansible-playbook from outside the checkout (an ansible.cfg that sets nothing of the display),
    a cluster file through aorta.cluster.cluster_json: the ok results of a debug task are hidden."""
    cluster = tmp_path / "cluster.json"
    cluster.write_text('{"node_dict": {"n1": {"vpc_ip": "10.0.0.1"}}, "username": "me", "priv_key_file": "/k"}')
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: aorta_nodes\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n        msg: hidden\n"
        "    - ansible.builtin.debug:\n        msg: skipped\n      when: false\n"
    )
    (tmp_path / "ansible.cfg").write_text("[defaults]\nforks = 2\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"),
        ANSIBLE_INVENTORY_ENABLED="aorta.cluster.cluster_json",
        ANSIBLE_NOCOLOR="1",
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(cluster), str(playbook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok: [n1]" not in proc.stdout and "skipping: [n1]" not in proc.stdout, proc.stdout
    assert "n1                         : ok=1" in proc.stdout  # the recap still counts it
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(cluster), str(playbook)],
        cwd=tmp_path,
        env=dict(env, ANSIBLE_DISPLAY_OK_HOSTS="True"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "ok: [n1]" in shown.stdout, shown.stdout


def test_the_runs_own_lines_go_to_its_console_log_and_nowhere_without_its_directory(tmp_path):
    shown: list[str] = []
    say = _console.printer(str(tmp_path), shown.append)
    say("run r1 on 3 nodes; results in x")
    _console.log_lines(str(tmp_path), ["verdict PASS: 4 of 4 thresholds met"])
    assert shown == ["run r1 on 3 nodes; results in x"]
    assert (tmp_path / "console.log").read_text().splitlines() == [
        "run r1 on 3 nodes; results in x",
        "verdict PASS: 4 of 4 thresholds met",
    ]
    _console.printer(str(tmp_path / "not-made"), shown.append)("check mode")
    assert not (tmp_path / "not-made").exists() and shown[-1] == "check mode"


def test_secrets_in_the_effective_variables_are_masked_at_any_depth():
    values = {
        "aorta_extra_env": {"HF_TOKEN": "hf_abc", "NCCL_DEBUG": "INFO", "nested": {"DB_PASSWORD": "x"}},
        "aorta_environment": {"OMP_NUM_THREADS": 1, "AWS_SECRET_ACCESS_KEY": "s"},
        "aorta_docker_image": "img:1",
    }
    found = _console.effective_variables(values)
    assert list(found) == sorted(values)
    assert found["aorta_extra_env"] == {
        "HF_TOKEN": "********",
        "NCCL_DEBUG": "INFO",
        "nested": {"DB_PASSWORD": "********"},
    }
    assert found["aorta_environment"] == {"OMP_NUM_THREADS": 1, "AWS_SECRET_ACCESS_KEY": "********"}
    assert found["aorta_docker_image"] == "img:1"
