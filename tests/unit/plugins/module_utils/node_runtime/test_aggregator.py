# SPDX-License-Identifier: GPL-3.0-or-later
"""The head's aggregator: its messages (HMAC, replays, junk), its fail-fast decisions on a scripted
clock, and its two sides over real UDP sockets on loopback."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _aggregator as ag
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _head_link as hw
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep, _sweep_net, _sweep_phase

SECRET = bytes.fromhex("11" * 32)
NODES = ["head", "w1", "w2"]


def aggregator(now=0.0, **kw):
    kw.setdefault("heartbeat_timeout", 30)
    kw.setdefault("join_timeout", 120)
    return ag.Aggregator("run1", SECRET, NODES, now=now, **kw)


def running(progress=None):
    return {"state": "running", "finished": False, "progress": progress or {"0": 3}}


def test_a_sealed_message_opens_with_its_secret_and_nothing_else_does():
    data = ag.seal(SECRET, "run1", "w1", 1, running())
    assert ag.open_sealed(SECRET, "run1", data) == ("w1", 1, running())
    with pytest.raises(ag.Refused) as other_key:
        ag.open_sealed(bytes(32), "run1", data)
    assert other_key.value.kind == "unauthenticated"
    tampered = json.loads(data)
    tampered["body"]["finished"] = True  # a forged failure with the MAC of a healthy report
    with pytest.raises(ag.Refused) as forged:
        ag.open_sealed(SECRET, "run1", json.dumps(tampered).encode())
    assert forged.value.kind == "unauthenticated"
    with pytest.raises(ag.Refused) as other_run:
        ag.open_sealed(SECRET, "run2", data)
    assert other_run.value.kind == "other_run"


@pytest.mark.parametrize(
    "data,kind",
    [
        (b"x" * (ag.MAX_DATAGRAM + 1), "oversized"),
        (b"not json", "not_json"),
        (b"[1, 2]", "not_json"),
        (json.dumps({"v": 1, "run": "run1", "node": "w1", "seq": "1", "body": {}, "mac": ""}).encode(), "not_json"),
        (json.dumps({"v": 1, "run": "run1", "node": "w1", "seq": 1, "body": {}}).encode(), "not_json"),
        (
            json.dumps({"v": 1, "run": "run1", "node": "w1", "seq": 1, "body": {}, "mac": "00"}).encode(),
            "unauthenticated",
        ),
    ],
)
def test_junk_and_unauthenticated_datagrams_change_nothing_and_are_counted(data, kind):
    agg = aggregator()
    before = agg.aggregate(1.0)
    assert agg.receive(data, 1.0) is None
    after = agg.aggregate(1.0)
    assert after["refused"][kind] == 1
    assert {k: v for k, v in after.items() if k != "refused"} == {k: v for k, v in before.items() if k != "refused"}


def test_a_replayed_report_is_refused_and_a_newer_one_accepted():
    agg = aggregator()
    first = ag.seal(SECRET, "run1", "w1", 5, running({"0": 1}))
    assert agg.receive(first, 1.0) is not None
    failed = ag.seal(SECRET, "run1", "w1", 6, {"state": "cleaning", "finished": True, "outcome": "failed", "rc": 1})
    # A replay of an old report must not bring the node back to life, nor hide its failure.
    assert agg.receive(failed, 2.0) is not None
    assert agg.receive(first, 3.0) is None and agg.refused["replay"] == 1
    assert agg.aggregate(3.0)["nodes"]["w1"]["finished"] is True
    assert agg.stop["node"] == "w1"


def test_a_node_not_in_the_run_is_refused_though_it_knows_the_secret():
    agg = aggregator()
    assert agg.receive(ag.seal(SECRET, "run1", "intruder", 1, running()), 1.0) is None
    assert agg.refused["unknown_node"] == 1 and "intruder" not in agg.aggregate(1.0)["nodes"]


def test_the_reply_answers_the_sequence_number_it_was_asked_with():
    agg = aggregator()
    reply = agg.receive(ag.seal(SECRET, "run1", "w2", 9, running()), 1.0)
    head, seq, body = ag.open_sealed(SECRET, "run1", reply)
    assert (head, seq, body) == ("head", 9, {"stop": False, "go": False})


def test_a_node_that_reports_a_failure_stops_everyone_naming_it():
    agg = aggregator()
    for node in NODES:
        agg.report(node, running(), 1.0)
    answer = agg.report(
        "w2", {"state": "cleaning", "finished": True, "outcome": "failed", "reason": "exit code 1"}, 2.0
    )
    assert answer == {
        "stop": True,
        "go": True,
        "node": "w2",
        "kind": "failed",
        "reason": "w2 failed: exit code 1",
        "after_s": 2.0,
    }
    assert agg.report("w1", running(), 3.0)["stop"] is True  # the next report of every other node hears it
    # Later failures (the peers that lost w2) do not change whom the stop is about.
    agg.report("w1", {"state": "cleaning", "finished": True, "outcome": "failed"}, 4.0)
    assert agg.stop["node"] == "w2"


def test_a_node_silent_for_the_heartbeat_timeout_is_named_and_not_before():
    agg = aggregator(heartbeat_timeout=30)
    for node in NODES:
        agg.report(node, running(), 0.0)
    for t in range(3, 30, 3):  # w2 is gone; the others go on reporting
        agg.report("head", running(), float(t))
        agg.report("w1", running(), float(t))
        assert agg.stop is None, t
    agg.report("w1", running(), 30.0)
    assert agg.tick(30.0) == {
        "node": "w2",
        "kind": "silent",
        "reason": "no heartbeat from w2 for 30 s",
        "after_s": 30.0,
    }
    assert not agg.settled()  # the others are still stopping
    for node in ("head", "w1"):
        agg.report(node, {"state": "cleaning", "finished": True, "outcome": "failed"}, 40.0)
    assert agg.settled()  # the silent node is not waited for
    assert agg.aggregate(30.0)["nodes"]["w2"]["silent_s"] == 30.0


def test_a_node_that_never_reports_is_named_after_the_join_timeout():
    agg = aggregator(join_timeout=60)
    agg.report("head", running(), 1.0)
    agg.report("w1", running(), 1.0)
    for t in range(3, 60, 3):
        agg.report("head", running(), float(t))
        agg.report("w1", running(), float(t))
    assert agg.stop is None
    agg.report("w1", running(), 60.0)
    assert agg.stop["node"] == "w2" and "never reported" in agg.stop["reason"]


def test_a_stopping_node_is_allowed_its_stop_s_bound_not_the_heartbeat_timeout():
    agg = aggregator(heartbeat_timeout=30, stopping_timeout=300)
    for node in NODES:
        agg.report(node, running(), 0.0)
    agg.report("w1", {"state": "diagnosing", "finished": False}, 1.0)  # capturing at its deadline
    for t in range(3, 301, 3):
        agg.report("head", running(), float(t))
        agg.report("w2", running(), float(t))
    assert agg.stop is None
    assert agg.tick(301.0)["node"] == "w1"


def test_every_node_finished_ok_is_settled_with_no_stop():
    agg = aggregator()
    for node in NODES:
        agg.report(node, {"state": "cleaning", "finished": True, "outcome": "ok", "rc": 0}, 5.0)
    assert agg.stop is None and agg.settled()
    assert agg.tick(500.0) is None  # a finished node is never silent


def test_the_aggregate_holds_no_secret():
    agg = aggregator()
    agg.receive(ag.seal(SECRET, "run1", "w1", 1, running()), 1.0)
    text = json.dumps(agg.aggregate(1.0))
    assert SECRET.hex() not in text and "mac" not in text


# Real sockets on loopback: the head's link in its thread, workers' links as their supervisors use them.


class Clock:
    def __init__(self):
        self.offset = 0.0

    def __call__(self):
        return time.monotonic() + self.offset


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def head(tmp_path):
    port = free_udp_port()
    written = []
    agg = ag.Aggregator("run1", SECRET, NODES, 30, 120, time.monotonic())
    link = hw.HeadLink(agg, "127.0.0.1", port, str(tmp_path / "agg.json"), write=lambda p, v: written.append(v))
    watch = hw.HeadWatch(link, linger_s=5)
    # The head launches once every node has joined: its join runs beside the workers' (join_all).
    joined = {}
    waiter = threading.Thread(target=lambda: joined.setdefault("head", watch.join()), daemon=True)
    waiter.start()
    watch.joined = joined
    yield watch, port, written
    if link.thread.is_alive():
        link.close()


def worker(name, port, **kw):
    link = hw.WorkerLink(SECRET, "run1", name, "127.0.0.1", port)
    return hw.WorkerWatch(link, "head", kw.get("heartbeat_timeout", 30), kw.get("join_timeout", 5))


def join_all(*watches):
    """Every watch's join, at once (each waits for every node): their answers, in order."""
    answers = [None] * len(watches)

    def join(i):
        answers[i] = watches[i].join()

    threads = [threading.Thread(target=join, args=(i,), daemon=True) for i in range(len(watches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return answers


def test_workers_join_report_and_hear_the_heads_stop_over_udp(head):
    watch, port, written = head
    w1, w2 = worker("w1", port), worker("w2", port)
    assert join_all(w1, w2) == ["", ""]
    time.sleep(0.6)  # the head's own wait asks again every JOIN_POLL_S
    assert watch.joined == {"head": ""}
    assert watch.beat(running()) is None and w1.beat(running()) is None
    w2.finish({"state": "cleaning", "finished": True, "outcome": "failed", "reason": "exit code 7"})
    assert w1.beat(running()) == {"node": "w2", "kind": "failed", "reason": "w2 failed: exit code 7", "by": "head"}
    assert watch.beat(running())["node"] == "w2"
    watch.link.close()
    final = written[-1]
    assert final["stop"]["node"] == "w2" and final["nodes"]["w1"]["seen"] is True
    assert SECRET.hex() not in json.dumps(written)


def test_a_forged_or_replayed_datagram_to_the_head_changes_nothing(head):
    watch, port, _written = head
    w1, w2 = worker("w1", port), worker("w2", port)
    assert join_all(w1, w2) == ["", ""]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        raw.settimeout(0.5)
        forged = ag.seal(bytes(32), "run1", "w2", 99, {"state": "cleaning", "finished": True, "outcome": "failed"})
        replay = ag.seal(SECRET, "run1", "w1", 1, {"state": "cleaning", "finished": True, "outcome": "failed"})
        for data in (forged, replay, b"{", b"y" * 9000):
            raw.sendto(data, ("127.0.0.1", port))
            with pytest.raises(socket.timeout):  # no answer to any of them
                raw.recv(ag.MAX_DATAGRAM + 1)
    assert w1.beat(running()) is None
    view = watch.link.aggregator.aggregate(time.monotonic())
    assert view["stop"] is None and view["nodes"]["w2"]["finished"] is False
    assert view["refused"]["unauthenticated"] == 1 and view["refused"]["replay"] == 1
    assert view["refused"]["not_json"] == 1 and view["refused"]["oversized"] == 1


def test_no_node_launches_until_every_node_has_joined():
    agg = aggregator()
    assert agg.report("head", {"state": "joining"}, 0.0)["go"] is False
    assert agg.report("w1", {"state": "joining"}, 1.0)["go"] is False
    assert agg.report("w1", {"state": "joining"}, 2.0)["go"] is False  # a second report is not a second node
    assert agg.report("w2", {"state": "joining"}, 3.0)["go"] is True
    assert agg.report("head", {"state": "joining"}, 3.5) == {"stop": False, "go": True}


def test_a_node_that_never_joins_keeps_every_other_from_launching_and_is_named(tmp_path):
    """One node fails its own launch step: the head and the workers that joined get no go, and
    once the join timeout has passed every one of them refuses to launch, naming that node."""
    port = free_udp_port()
    agg = ag.Aggregator("run1", SECRET, NODES, 1, 1.5, time.monotonic())
    link = hw.HeadLink(agg, "127.0.0.1", port)
    started = time.monotonic()
    try:
        head_says, w1_says = join_all(hw.HeadWatch(link, linger_s=5), worker("w1", port))
    finally:
        link.close()
    assert head_says == "the run stopped before its ranks started: w2 never reported to the head in 2 s"
    assert w1_says == "the head stopped the run before this node launched: w2 never reported to the head in 2 s"
    assert 1.4 < time.monotonic() - started < 5


def test_a_worker_that_cannot_reach_the_head_refuses_to_launch_with_a_fabric_message():
    lonely = worker("w1", free_udp_port(), join_timeout=1.5)
    started = time.monotonic()
    refused = lonely.join()
    assert refused.startswith("fabric: the head head's aggregator at 127.0.0.1:") and "/udp did not answer" in refused
    assert time.monotonic() - started < 4


def test_a_worker_whose_head_goes_quiet_stops_itself_naming_the_head(head):
    watch, port, _written = head
    clock = Clock()
    link = hw.WorkerLink(SECRET, "run1", "w1", "127.0.0.1", port, clock=clock)
    w1 = hw.WorkerWatch(link, "head", 30, 5, clock=clock)
    assert join_all(w1, worker("w2", port)) == ["", ""] and w1.beat(running()) is None
    watch.link.close()  # the head is gone
    clock.offset = 29.0
    assert w1.beat(running()) is None
    clock.offset = 31.0
    stop = w1.beat(running())
    assert (stop["node"], stop["kind"], stop["by"]) == ("head", "silent", "self")
    assert stop["reason"].startswith("no answer from the head head for 3")  # 31 s and what the test took


def test_the_head_keeps_serving_after_its_own_end_until_every_node_has_ended(head):
    watch, port, written = head
    w1, w2 = worker("w1", port), worker("w2", port)
    assert join_all(w1, w2) == ["", ""]
    done = {"state": "cleaning", "finished": True, "outcome": "ok", "rc": 0}
    w1.finish(done)
    started = time.monotonic()
    late = threading.Timer(1.0, lambda: w2.finish(done))
    late.start()
    watch.finish(done)
    while watch.waiting():  # until w2 has reported its end, well before the linger bound
        time.sleep(0.1)
    late.join()
    watch.close()
    assert 0.9 < time.monotonic() - started < 4
    assert written[-1]["settled"] is True and written[-1]["stop"] is None and watch.silent() == {}


def test_the_head_waits_for_a_dead_node_only_until_it_counts_as_silent_and_names_it():
    """A node dies: its peers fail first (gloo saw the lost connection) and the head's own failure
    stops the run; the dead node is still named, once its heartbeat timeout has passed."""
    agg = aggregator(heartbeat_timeout=30)
    for node in NODES:
        agg.report(node, running(), 0.0)
    agg.report("head", {"state": "cleaning", "finished": True, "outcome": "failed", "reason": "exit code 1"}, 5.0)
    agg.report("w1", {"state": "cleaning", "finished": True, "outcome": "failed", "reason": "exit code 1"}, 6.0)
    assert agg.stop["node"] == "head" and not agg.settled()  # w2 might still be stopping
    agg.tick(29.0)
    assert not agg.settled()
    agg.tick(30.0)
    assert agg.silent == {"w2": "no heartbeat from w2 for 30 s"} and agg.settled()
    assert agg.aggregate(30.0)["silent"] == {"w2": "no heartbeat from w2 for 30 s"}


def test_the_controllers_stop_request_stops_every_node_with_its_reason(head, tmp_path):
    """The controller writes aggregates/<run_id>.stop on the head (the user's Ctrl-C): the head's
    next beat takes it into the aggregator, whose answer stops every worker, naming the controller."""
    watch, port, _written = head
    w1, w2 = worker("w1", port), worker("w2", port)
    assert join_all(w1, w2) == ["", ""]
    stop_path = ag.stop_request_path(str(tmp_path / "aggregates" / "run1.json"))
    assert stop_path == str(tmp_path / "aggregates" / "run1.stop")
    watch.stop_path = stop_path
    assert watch.beat(running()) is None  # no request yet
    (tmp_path / "aggregates").mkdir()
    (tmp_path / "aggregates" / "run1.stop").write_text("interrupted on the controller at 10:00 (SIGINT)\n")
    mine = watch.beat(running())
    assert mine == {
        "node": "controller",
        "kind": "stopped",
        "reason": "interrupted on the controller at 10:00 (SIGINT)",
        "by": "head",
    }
    assert w1.beat(running()) == mine and w2.beat(running())["kind"] == "stopped"
    # A stop decided first stays: the request does not rewrite it.
    agg = aggregator()
    agg.report("w1", {"state": "cleaning", "finished": True, "outcome": "failed", "reason": "exit 1"}, 1.0)
    assert agg.request_stop("interrupted", 2.0)["node"] == "w1"
    watch.link.close()


def test_no_stop_request_file_reads_as_none_and_an_empty_one_still_stops(tmp_path):
    assert ag.read_stop_request(None) is None and ag.read_stop_request(str(tmp_path / "none.stop")) is None
    (tmp_path / "empty.stop").write_text("")
    assert ag.read_stop_request(str(tmp_path / "empty.stop")) == "stopped from the controller"


def test_a_run_no_controller_watches_for_the_grace_is_stopped_by_the_head(tmp_path):
    """aorta_orphan_grace_seconds: the watch's poll touches the mark; its age (or the launch's,
    before the first poll) past the grace is a stop; 0 never stops."""
    now = [1000.0]
    mark = tmp_path / "run1.watched"
    orphan = ag.Orphan(str(mark), 60, wall=lambda: now[0])
    assert orphan.reason() is None
    now[0] = 1061.0
    assert orphan.reason() == "no controller has watched the run for 61 s (aorta_orphan_grace_seconds 60)"
    mark.touch()
    os.utime(mark, (1050.0, 1050.0))
    assert orphan.reason() is None  # a poll 11 s ago
    now[0] = 1111.0
    assert orphan.reason().startswith("no controller has watched the run for 61 s")
    assert ag.Orphan(str(mark), 0, wall=lambda: now[0]).reason() is None
    assert ag.watched_path("/v/aggregates/run1.json") == "/v/aggregates/run1.watched"


def test_the_orphan_stop_waits_for_the_ranks_to_start(head, tmp_path):
    """During the join the controller is still launching (no watch yet): no orphan stop; after
    the go, the grace counts from then."""
    watch, port, _written = head
    now = [0.0]
    watch.orphan = ag.Orphan(str(tmp_path / "none.watched"), 5, wall=lambda: now[0])
    now[0] = 100.0  # a long join: past the grace already
    w1, w2 = worker("w1", port), worker("w2", port)
    assert join_all(w1, w2) == ["", ""]
    time.sleep(0.6)
    assert watch.joined == {"head": ""} and watch.orphan.since == 100.0
    assert watch.beat(running()) is None
    now[0] = 106.0
    stop = watch.beat(running())
    assert stop["node"] == "controller" and stop["kind"] == "stopped" and "watched" in stop["reason"]
    assert w1.beat(running())["kind"] == "stopped"
    watch.link.close()


# The fabric sweep between the join and the go (the phase itself: test_sweep_phase.py).


def sweep_join(node, tool="tcp"):
    return {"state": "joining", "finished": False, "sweep_endpoint": {"address": node, "port": 5000, "tool": tool}}


def sweep_figures(node, rates):
    """The node's own figures for 3 nodes' 2 rounds, each pair at its slower end's rate."""
    rank = NODES.index(node)
    rows = [
        dict(
            step,
            send_gbps=min(rates[rank], rates[step["send_to"]]),
            recv_gbps=min(rates[rank], rates[step["recv_from"]]),
        )
        for step in _sweep.plan(len(NODES), rank)
    ]
    return {"state": "joining", "finished": False, "sweep_figures": rows}


def test_with_a_sweep_the_go_waits_for_every_nodes_figures_and_each_node_hears_its_verdict():
    agg = aggregator(sweep={"seconds": 1.0, "threshold": 0.5, "min_gbps": 0})
    for node in NODES:
        answer = agg.report(node, sweep_join(node), 0.0)
    assert answer["go"] is False and answer["sweep"]["rank"] == 2
    assert answer["sweep"]["plan"][0]["send_address"] == "head"
    rates = [10.0, 10.0, 1.0]
    assert agg.report("head", sweep_figures("head", rates), 2.0)["go"] is False
    agg.report("w1", sweep_figures("w1", rates), 2.1)
    last = agg.report("w2", sweep_figures("w2", rates), 2.2)
    assert last["go"] is True and last["stop"] is False and "sweep" not in last
    assert last["sweep_result"]["slow"] is True and last["sweep_result"]["send_gbps"] == 1.0
    assert agg.sweep.summary()["slow"][0]["node"] == "w2"
    # What the aggregate keeps of a report is its state, not the sweep's figures (the aggregate stays small).
    assert "sweep_figures" not in json.dumps(agg.aggregate(3.0))


def test_a_node_below_the_minimum_stops_the_run_before_any_rank_starts_naming_it():
    agg = aggregator(sweep={"seconds": 1.0, "threshold": 0.5, "min_gbps": 2.0})
    for node in NODES:
        agg.report(node, sweep_join(node), 0.0)
    rates = [10.0, 10.0, 1.0]
    for node in NODES:
        answer = agg.report(node, sweep_figures(node, rates), 2.0)
    assert answer["stop"] is True and answer["node"] == "w2" and answer["kind"] == "fabric"
    assert answer["reason"].startswith("fabric sweep: w2 sends at 1 Gbit/s at best, below aorta_fabric_min_gbps 2")


def test_three_nodes_sweep_over_loopback_between_the_join_and_the_go():
    """The head's aggregator in its thread, two workers over UDP, and every node's real TCP endpoint:
    the plan travels in the answers, the figures in the reports, the verdict back, then the go."""

    def participant(rank):
        endpoint = _sweep_net.SweepEndpoint(SECRET, "run1", rank, "127.0.0.1")
        return _sweep_phase.Participant(endpoint, "tcp", "asked for", clock=time.monotonic)

    port = free_udp_port()
    agg = ag.Aggregator(
        "run1", SECRET, NODES, 30, 120, time.monotonic(), sweep={"seconds": 0.6, "threshold": 0.5, "min_gbps": 0}
    )
    link = hw.HeadLink(agg, "127.0.0.1", port)
    head = hw.HeadWatch(link, linger_s=5, sweep=participant(0))
    workers = [
        hw.WorkerWatch(hw.WorkerLink(SECRET, "run1", name, "127.0.0.1", port), "head", 30, 5, sweep=participant(i + 1))
        for i, name in enumerate(NODES[1:])
    ]
    started = time.monotonic()
    try:
        assert join_all(head, *workers) == ["", "", ""]
    finally:
        link.close()
    assert time.monotonic() - started < _sweep_phase.bound_s(0.6) + 2
    record = head.sweep_record()
    assert record["cluster"]["tool"] == "tcp" and record["cluster"]["slow"] == [], record
    assert record["cluster"]["not_measured"] == [] and record["cluster"]["median_gbps"] > 0.1
    for watch in (head, *workers):
        mine = watch.sweep_record()
        assert mine["slow"] is False and len(mine["rounds"]) == 2 and mine["send_gbps"] > 0.1, mine
        assert 0.6 <= mine["took_s"] <= _sweep_phase.bound_s(0.6), mine


def test_after_the_go_the_reports_of_the_run_get_no_sweep_in_their_answers():
    agg = aggregator(sweep={"seconds": 1.0, "threshold": 0.5, "min_gbps": 0})
    for node in NODES:
        agg.report(node, sweep_join(node), 0.0)
    for node in NODES:
        agg.report(node, sweep_figures(node, [10.0, 10.0, 10.0]), 2.0)
    assert "sweep_result" in agg.report("w1", {"state": "joining", "finished": False}, 2.1)
    assert agg.report("w1", running(), 5.0) == {"stop": False, "go": True}
