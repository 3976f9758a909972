# SPDX-License-Identifier: GPL-3.0-or-later
"""The first Ctrl-C or SIGTERM writes the stop request and lets Ansible carry on; a second hands the
signal to Ansible's own handler. Real signals to this process, the previous handler a stand-in for
the task queue manager's."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt


@pytest.fixture
def handler(tmp_path, monkeypatch):
    monkeypatch.setenv(_interrupt.ENV, str(tmp_path))
    said: list[str] = []
    ansible: list[int] = []
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in saved:  # what the task queue manager installs before the lookup runs
        signal.signal(signum, lambda number, _frame: ansible.append(number))
    found = _interrupt.Interrupts(str(tmp_path), said.append, clock=lambda: 1796000000.0)
    found.install()
    yield found, said, ansible
    for signum, previous in saved.items():
        signal.signal(signum, previous)


def test_the_first_signal_asks_the_run_to_stop_and_the_second_leaves_through_ansible(handler):
    found, said, ansible = handler
    _interrupt.note_run("r1", 3)
    os.kill(os.getpid(), signal.SIGINT)
    assert ansible == []  # Ansible carries on
    request = _interrupt.requested()
    assert request == {
        "at": 1796000000.0,
        "signal": "SIGINT",
        "reason": "interrupted on the controller at 2026-11-30 00:53:20 UTC (SIGINT)",
    }
    assert said == ["stopping the run on 3 nodes; interrupt again to leave now"]
    os.kill(os.getpid(), signal.SIGINT)
    assert ansible == [signal.SIGINT]
    assert said[-1] == (
        "leaving now; to stop the run later: ansible-playbook aorta.cluster.stop -i <your cluster file> "
        "-e aorta_run_id=r1"
    )
    assert found.count == 2


def test_sigterm_stops_the_run_the_same_way(handler):
    _found, said, ansible = handler
    os.kill(os.getpid(), signal.SIGTERM)
    assert ansible == [] and _interrupt.requested()["signal"] == "SIGTERM"
    assert said == ["stopping the run; interrupt again to leave now"]


def test_the_first_step_that_sees_the_request_names_the_phase(tmp_path, monkeypatch):
    monkeypatch.setenv(_interrupt.ENV, str(tmp_path))
    assert _interrupt.claim("before launch") is None  # nothing asked
    (tmp_path / _interrupt.REQUEST).write_text('{"at": 1, "signal": "SIGINT", "reason": "r"}')
    assert _interrupt.claim("while training")["phase"] == "while training"
    assert _interrupt.claim("while collecting")["phase"] == "while training"
    monkeypatch.delenv(_interrupt.ENV)
    assert _interrupt.requested() is None and _interrupt.claim("before launch") is None


def test_the_head_command_writes_the_request_atomically_whatever_the_reason(tmp_path):
    path = tmp_path / "aggregates" / "r1.stop"
    path.parent.mkdir()
    reason = "interrupted on the controller at 10:00 (SIGINT); it's $HOME `x`"
    subprocess.run(["sh", "-c", _interrupt.head_command(str(path), reason)], check=True)
    assert path.read_text() == reason + "\n" and not (tmp_path / "aggregates" / "r1.stop.tmp").exists()
