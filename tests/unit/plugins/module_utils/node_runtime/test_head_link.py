# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The join's end sent unasked (Aggregator.pushes, HeadLink, WorkerLink.wait_push) and the join's
pauses that wake on it and on a node's sweep figures. (The links' and watches' other behaviour is
in test_aggregator.py, beside the state machine they serve.)"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _aggregator as ag
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _head_link as hw
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep_phase

SECRET = bytes.fromhex("33" * 32)
NODES = ["head", "w1", "w2"]


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def joining():
    return {"state": "joining", "finished": False}


def test_the_join_end_is_pushed_once_to_every_worker_with_its_last_report_number():
    agg = ag.Aggregator("run1", SECRET, NODES, 30, 120, 0.0)
    agg.receive(ag.seal(SECRET, "run1", "w1", 4, joining()), 1.0, ("10.0.0.2", 999))
    assert agg.pushes(1.0) == []  # w2 has not joined: nothing has ended
    agg.receive(ag.seal(SECRET, "run1", "w2", 7, joining()), 1.5, ("10.0.0.3", 999))
    assert agg.pushes(1.5) == []  # nor has the head
    agg.report("head", joining(), 2.0)
    pushed = dict(agg.pushes(2.0))
    assert set(pushed) == {("10.0.0.2", 999), ("10.0.0.3", 999)}  # the head's own needs no datagram
    went = ag.open_sealed(SECRET, "run1", pushed[("10.0.0.2", 999)])
    assert went == ("head", 4, {"stop": False, "go": True, "push": "end"})
    assert ag.open_sealed(SECRET, "run1", pushed[("10.0.0.3", 999)])[1] == 7
    assert agg.pushes(3.0) == []  # once


def test_a_stop_before_the_go_is_pushed_too():
    agg = ag.Aggregator("run1", SECRET, NODES, 30, 120, 0.0)
    agg.receive(ag.seal(SECRET, "run1", "w1", 1, joining()), 1.0, ("10.0.0.2", 999))
    agg.request_stop("stopped from the controller", 1.5)
    ((peer, datagram),) = agg.pushes(1.5)
    _head, seq, answer = ag.open_sealed(SECRET, "run1", datagram)
    assert peer == ("10.0.0.2", 999) and seq == 1 and answer["stop"] is True and answer["go"] is False


def test_a_worker_takes_the_pushed_answer_to_its_last_report_and_nothing_older():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as head:
        head.bind(("127.0.0.1", 0))
        link = hw.WorkerLink(SECRET, "run1", "w1", "127.0.0.1", head.getsockname()[1])
        assert link.report(joining(), wait=0.05) is None  # seq 1, unanswered
        peer = head.recvfrom(9000)[1]
        head.sendto(ag.seal(SECRET, "run1", "head", 0, {"go": True, "stop": False}), peer)  # older
        head.sendto(ag.seal(bytes(32), "run1", "head", 1, {"go": True, "stop": False}), peer)  # forged
        assert link.wait_push(0.2) is None
        head.sendto(ag.seal(SECRET, "run1", "head", 1, {"go": True, "stop": False}), peer)
        assert link.wait_push(1.0) == {"go": True, "stop": False} and link.answered
        # The same datagram again (duplicated on the way, or replayed): taken once, not twice.
        head.sendto(ag.seal(SECRET, "run1", "head", 1, {"go": True, "stop": False}), peer)
        assert link.wait_push(0.2) is None
        # A push of a kind not yet taken for this report is taken; the same push again is not.
        head.sendto(ag.seal(SECRET, "run1", "head", 1, {"go": False, "push": "plan"}), peer)
        head.sendto(ag.seal(SECRET, "run1", "head", 1, {"go": False, "push": "plan"}), peer)
        assert link.wait_push(1.0) == {"go": False, "push": "plan"} and link.wait_push(0.2) is None
        link.close()


class Ready:
    """A sweep participant whose figures become ready when the test says so."""

    def __init__(self):
        self.figures, self.figures_sent = None, False

    def figures_due(self):
        return self.figures is not None and not self.figures_sent


def test_a_workers_join_pause_ends_when_its_figures_are_ready_or_the_head_pushes():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as head:
        head.bind(("127.0.0.1", 0))
        link = hw.WorkerLink(SECRET, "run1", "w1", "127.0.0.1", head.getsockname()[1])
        sweep = Ready()
        watch = hw.WorkerWatch(link, "head", 30, 30, sweep=sweep)
        link.report(joining(), wait=0.01)
        peer = head.recvfrom(9000)[1]
        threading.Timer(0.1, lambda: setattr(sweep, "figures", [])).start()
        started = time.monotonic()
        assert watch._pause() is None  # its figures are due: report them now
        assert time.monotonic() - started < hw.JOIN_POLL_S
        sweep.figures_sent = True
        threading.Timer(0.1, lambda: head.sendto(ag.seal(SECRET, "run1", "head", 1, {"go": True}), peer)).start()
        assert watch._pause() == {"go": True}
        link.close()


def test_three_nodes_join_and_every_one_learns_the_go_the_moment_the_last_joins():
    """Two workers join first and pause; the head's own report completes the join, and the pushed
    go reaches both within their pause, not at their next report."""
    port = free_udp_port()
    agg = ag.Aggregator("run1", SECRET, NODES, 30, 120, time.monotonic())
    link = hw.HeadLink(agg, "127.0.0.1", port).start()
    workers = [hw.WorkerWatch(hw.WorkerLink(SECRET, "run1", n, "127.0.0.1", port), "head", 30, 5) for n in NODES[1:]]
    answers = {}
    try:
        for i, watch in enumerate(workers):
            assert watch.link.report(joining())["go"] is False
            thread = threading.Thread(target=lambda w=watch, k=i: answers.setdefault(k, w._pause()), daemon=True)
            thread.start()
        time.sleep(0.05)
        assert link.report(joining())["go"] is True
        for _attempt in range(100):
            if len(answers) == 2:
                break
            time.sleep(0.01)
    finally:
        link.close()
    assert answers == {0: {"stop": False, "go": True, "push": "end"}, 1: {"stop": False, "go": True, "push": "end"}}
    assert link.join_ended.is_set()


def test_with_a_sweep_each_worker_is_sent_its_plan_the_moment_the_last_node_joins_then_the_end():
    agg = ag.Aggregator("run1", SECRET, NODES, 30, 120, 0.0, sweep={"seconds": 1.0, "threshold": 0.5, "min_gbps": 0})
    endpoint = {"state": "joining", "finished": False, "sweep_endpoint": {"address": "a", "port": 5000, "tool": "tcp"}}
    agg.receive(ag.seal(SECRET, "run1", "w1", 1, endpoint), 1.0, ("10.0.0.2", 999))
    agg.report("head", endpoint, 1.1)
    assert agg.pushes(1.1) == []  # w2 has not joined
    agg.receive(ag.seal(SECRET, "run1", "w2", 1, endpoint), 1.2, ("10.0.0.3", 999))
    plans = dict(agg.pushes(1.2))
    _head, seq, answer = ag.open_sealed(SECRET, "run1", plans[("10.0.0.2", 999)])
    assert seq == 1 and answer["go"] is False and answer["sweep"]["rank"] == 1
    assert answer["sweep"]["start_in"] == pytest.approx(_sweep_phase.LEAD_S)
    assert agg.pushes(1.3) == []  # the plan once; the end is not decided yet
    agg.request_stop("stopped from the controller", 1.4)
    assert {ag.open_sealed(SECRET, "run1", d)[2]["stop"] for _peer, d in agg.pushes(1.4)} == {True}
    assert agg.pushes(1.5) == []
