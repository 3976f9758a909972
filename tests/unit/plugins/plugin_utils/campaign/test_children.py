# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each group's run as a child ansible-playbook: what it repeats of the campaign's command line,
its argv, and the runner (real child processes: at most ``parallel`` at once, their output in
their logs, one SIGINT each on a stop request, nothing started after it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _children

# A child that takes its first SIGINT as a run takes its first Ctrl-C: it finishes and says so.
STOPS_ON_SIGINT = (
    "import signal, sys, time\n"
    "got = []\n"
    "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
    "print('ready', flush=True)\n"
    "end = time.time() + 10\n"
    "while not got and time.time() < end: time.sleep(0.02)\n"
    "print('stopped' if got else 'not stopped', flush=True)\n"
)


def test_the_campaigns_options_are_repeated_in_order():
    cliargs = {
        "extra_vars": ["@vars.yml", "aorta_train_steps=5", '{"aorta_train_steps": 6}'],
        "verbosity": 2,
        "forks": 50,
        "private_key_file": "/k/id",
        "ssh_common_args": "-o X=y",
        "timeout": None,
    }
    options = _children.repeated_options(cliargs)
    assert options[:6] == ["-e", "@vars.yml", "-e", "aorta_train_steps=5", "-e", '{"aorta_train_steps": 6}']
    assert options[6:] == ["-vv", "--forks", "50", "--private-key", "/k/id", "--ssh-common-args", "-o X=y"]


@pytest.mark.parametrize("prompt", ["ask_pass", "become_ask_pass", "ask_vault_pass"])
def test_a_password_prompt_is_refused(prompt):
    with pytest.raises(_children.ChildError, match="cannot ask for a password again"):
        _children.repeated_options({prompt: True})


def test_the_vault_options_are_repeated():
    cliargs = {"vault_ids": ["prod@/k/prod.txt"], "vault_password_files": ["/k/pw"]}
    assert _children.repeated_options(cliargs) == ["--vault-id", "prod@/k/prod.txt", "--vault-password-file", "/k/pw"]


def test_the_groups_run_id_and_directory_come_last():
    argv = _children.child_argv(
        "/bin/ansible-playbook", "/c/k2/g0.cluster.json", ["-e", "x=1"], "c-k2-g0", "/c/k2/g0", False
    )
    assert argv[:4] == ["/bin/ansible-playbook", _children.PLAYBOOK, "-i", "/c/k2/g0.cluster.json"]
    assert argv[-2] == "-e" and json.loads(argv[-1]) == {
        "aorta_run_id": "c-k2-g0",
        "aorta_results_dir": "/c/k2/g0",
        # A group of one node would run Aorta's own script (no --override): another workload than rung 2's.
        "aorta_master_launch_mode": "torchrun",
        # A node preflight excluded would count in the group's throughput per node and be cleared by it.
        "aorta_exclude_unhealthy": False,
    }
    assert _children.PLAYBOOK.endswith("playbooks/aorta_multinode.yml")
    # Nodes read from -e aorta_cluster_file: the group's file the same way, over localhost alone.
    argv = _children.child_argv("ap", "/c/g.json", [], "r", "/d", True)
    assert argv[argv.index("-i") + 1] == "localhost,"
    assert json.loads(argv[-1])["aorta_cluster_file"] == "/c/g.json"


def test_the_ansible_playbook_beside_the_campaigns_is_taken(tmp_path):
    beside = tmp_path / "ansible-playbook"
    beside.write_text("#!/bin/sh\n")
    beside.chmod(0o755)
    assert _children.executable(str(beside), lambda name: "/usr/bin/" + name) == str(beside)
    assert _children.executable("/x/python", lambda name: "/usr/bin/" + name) == "/usr/bin/ansible-playbook"
    with pytest.raises(_children.ChildError, match="needs ansible-playbook on the PATH"):
        _children.executable("/x/python", lambda name: None)


def _job(tmp_path, index, code="", seconds=0.3):
    script = f"import time, sys; print('group {index}', flush=True); time.sleep({seconds}); {code}"
    return [sys.executable, "-c", script], str(tmp_path / f"g{index}.log")


def test_jobs_run_at_most_parallel_at_once_with_their_output_in_their_logs(tmp_path, monkeypatch):
    monkeypatch.setattr(_children, "POLL_S", 0.05)
    jobs = [_job(tmp_path, i, code=f"sys.exit({i})") for i in range(5)]
    starts = []
    codes, stopped = _children.run_all(jobs, 2, lambda: False, started=lambda i: starts.append((i, time.monotonic())))
    assert codes == [0, 1, 2, 3, 4] and not stopped
    assert [i for i, _t in starts] == [0, 1, 2, 3, 4]
    # The third started only once one of the first two had ended (each sleeps 0.3 s).
    assert starts[2][1] - starts[0][1] >= 0.25
    for i in range(5):
        assert (tmp_path / f"g{i}.log").read_text() == f"group {i}\n"


def test_a_stop_request_hands_each_running_child_one_sigint_and_starts_no_other(tmp_path, monkeypatch):
    monkeypatch.setattr(_children, "POLL_S", 0.05)
    code = STOPS_ON_SIGINT + "sys.exit(3)\n"
    jobs = [([sys.executable, "-c", code], str(tmp_path / f"g{i}.log")) for i in range(4)]
    asked = []

    def requested():
        ready = all(
            (tmp_path / f"g{i}.log").exists() and "ready" in (tmp_path / f"g{i}.log").read_text() for i in (0, 1)
        )
        asked.append(ready)
        return ready

    codes, stopped = _children.run_all(jobs, 2, requested)
    assert stopped and codes == [3, 3, None, None]
    assert [(tmp_path / f"g{i}.log").read_text().split() for i in (0, 1)] == [["ready", "stopped"]] * 2
    assert not (tmp_path / "g2.log").exists() and not (tmp_path / "g3.log").exists()


def test_a_group_stopped_from_outside_hands_the_others_their_sigint_and_starts_no_other(tmp_path, monkeypatch):
    """aorta.cluster.stop ended group 0's run (it exits non-zero, its run.json says STOPPED): group 1,
    still running, gets its Ctrl-C, and the two queued never start."""
    monkeypatch.setattr(_children, "POLL_S", 0.05)
    ready = tmp_path / "g1.log"  # group 0 ends once group 1 listens for its SIGINT
    first = (
        f"import pathlib, time\nlog = pathlib.Path({str(ready)!r})\n"
        "while not log.exists() or 'ready' not in log.read_text():\n"
        "    time.sleep(0.02)\n"
        "raise SystemExit(2)\n"
    )
    jobs = [([sys.executable, "-c", first], str(tmp_path / "g0.log"))]
    jobs += [
        ([sys.executable, "-c", STOPS_ON_SIGINT + "sys.exit(3)\n"], str(tmp_path / f"g{i}.log")) for i in (1, 2, 3)
    ]
    asked = []

    def was_stopped(index):
        asked.append(index)
        return index == 0

    codes, requested = _children.run_all(jobs, 2, lambda: False, was_stopped=was_stopped)
    assert codes == [2, 3, None, None] and requested
    assert asked in ([0, 1], [0])  # asked of a job that ended non-zero only
    assert (tmp_path / "g1.log").read_text().split() == ["ready", "stopped"]
    assert not (tmp_path / "g2.log").exists() and not (tmp_path / "g3.log").exists()
    # A job that ended 0 is never asked; one that failed without a stop lets the rest run.
    calm = [([sys.executable, "-c", f"raise SystemExit({i})"], str(tmp_path / f"c{i}.log")) for i in (0, 1, 1)]
    asked.clear()
    assert _children.run_all(calm, 1, lambda: False, was_stopped=lambda i: bool(asked.append(i))) == ([0, 1, 1], False)
    assert asked == [1, 2]


def test_a_child_runs_in_a_session_of_its_own(tmp_path, monkeypatch):
    """A terminal's Ctrl-C reaches the campaign only; the campaign hands it on once."""
    monkeypatch.setattr(_children, "POLL_S", 0.05)
    job = ([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"], str(tmp_path / "g.log"))
    assert _children.run_all([job], 1, lambda: False) == ([0], False)
    assert (tmp_path / "g.log").read_text().strip() == "True"


def test_children_already_started_are_stopped_and_waited_for_when_one_cannot_start(tmp_path, monkeypatch):
    """No file descriptor or memory left for the third child: the two running get their SIGINT and
    are waited for before the error goes on (none is left running unwatched)."""
    monkeypatch.setattr(_children, "POLL_S", 0.05)
    code = STOPS_ON_SIGINT
    started = []

    def popen(argv, **kwargs):
        if len(started) == 2:
            for index in range(2):  # both are listening for their SIGINT before the failure
                while "ready" not in (tmp_path / f"g{index}.log").read_text():
                    time.sleep(0.02)
            raise OSError(24, "Too many open files")
        child = subprocess.Popen(argv, **kwargs)
        started.append(child)
        return child

    jobs = [([sys.executable, "-c", code], str(tmp_path / f"g{i}.log")) for i in range(3)]
    with pytest.raises(OSError, match="Too many open files"):
        _children.run_all(jobs, 3, lambda: False, popen=popen)
    assert [child.poll() for child in started] == [0, 0]
    assert [(tmp_path / f"g{i}.log").read_text().split() for i in (0, 1)] == [["ready", "stopped"]] * 2
