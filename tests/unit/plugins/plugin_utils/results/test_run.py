# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/results/_run.py: a node's outcome, the run's status and its first failure, torchrun's root
cause, a setup that stopped, and the end table."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _run

DATA = Path(__file__).parent / "run_data"


@pytest.mark.parametrize(
    "wait,expected",
    [
        ({"finished": True, "status": {"outcome": "ok", "rc": 0}}, ("ok", 0)),
        ({"finished": True, "status": {"outcome": "failed", "rc": 3}}, ("failed", 3)),
        ({"finished": True, "status": {"outcome": "failed", "rc": None}}, ("failed", -1)),
        ({"finished": True, "status": {"outcome": "timeout", "rc": -15}}, ("timeout", -1)),
        ({"finished": False, "lost": "late", "status": {"state": "running"}}, ("timeout", -1)),
        ({"finished": False, "lost": "never started", "status": None}, ("failed", -1)),
        (None, ("not_started", None)),
        ({"skipped": True}, ("not_started", None)),
        ({"unreachable": True, "finished": False}, ("unreachable", None)),
        ({"node_unreachable": True, "finished": False, "status": {"state": "running"}}, ("unreachable", None)),
    ],
)
def test_node_state(wait, expected):
    result = _run.node_state(wait)
    assert (result["state"], result["exit_code"]) == expected


def test_all_ok_is_completed():
    status = _run.run_status([{"name": "a", "state": "ok"}, {"name": "b", "state": "ok"}])
    assert status == {
        "status": "COMPLETED",
        "failed_nodes": [],
        "first_failure": None,
        "message": "all 2 nodes completed",
    }


def test_no_nodes_is_failed():
    assert _run.run_status([])["status"] == "FAILED"


def test_failure_names_the_node_where_it_started_not_the_ones_that_lost_a_peer():
    own = _run.torchrun_failure((DATA / "torchrun_own_failure.log").read_text())
    peer = _run.torchrun_failure((DATA / "torchrun_peer_failure.log").read_text())
    assert own["root_cause_rank"] == 3 and own["root_cause_exit"] == 1 and not own["secondary"]
    assert peer["root_cause_rank"] == 1 and peer["secondary"]
    status = _run.run_status(
        [
            {"name": "head", "rank": 0, "state": "failed", "exit_code": 1, "failure": peer},
            {"name": "w1", "rank": 1, "state": "failed", "exit_code": 1, "failure": own},
        ]
    )
    assert status["status"] == "FAILED"
    assert status["first_failure"] == "w1"
    assert status["failed_nodes"] == ["w1", "head"]
    assert "rank 3 exit 1" in status["message"] and "after a peer failed" in status["message"]


def test_timeout_names_the_node_of_the_rank_that_got_least_far():
    status = _run.run_status(
        [
            {"name": "head", "rank": 0, "state": "timeout", "exit_code": -1, "progress": {"0": 4, "1": 4}},
            {"name": "w1", "rank": 1, "state": "timeout", "exit_code": -1, "progress": {"2": 4, "3": 3}},
            {"name": "w2", "rank": 2, "state": "ok", "exit_code": 0},
        ]
    )
    assert status["status"] == "TIMEOUT"
    assert status["first_failure"] == "w1"
    assert "rank 3 stuck after 3 steps" in status["message"]


def test_timeout_wins_over_failure_and_equal_progress_names_no_laggard():
    status = _run.run_status(
        [
            {"name": "a", "rank": 0, "state": "failed", "exit_code": 1, "progress": {"0": 2}},
            {"name": "b", "rank": 1, "state": "timeout", "exit_code": -1, "progress": {"1": 2}},
        ]
    )
    assert status["status"] == "TIMEOUT"
    assert status["first_failure"] == "b"
    assert "stuck" not in status["message"]


def fabric(link_up=True, head_reached=True, operstate="up"):
    ok = link_up and head_reached is not False
    return {
        "interface": "eth1",
        "operstate": operstate,
        "carrier": None,
        "link_up": link_up,
        "head": "10.0.0.1:29500",
        "head_reached": head_reached,
        "error": "" if head_reached else "No route to host",
        "ok": ok,
    }


def timed_out(name, rank, check):
    return {
        "name": name,
        "rank": rank,
        "state": "timeout",
        "exit_code": -1,
        "progress": {str(rank): 31},
        "fabric": check,
    }


def test_a_node_whose_fabric_link_went_down_is_named_first_although_every_rank_waited_alike():
    nodes = [
        timed_out("head", 0, fabric(head_reached=None)),
        timed_out("w1", 1, fabric(link_up=False, head_reached=False, operstate="down")),
        timed_out("w2", 2, fabric()),
    ]
    status = _run.run_status(nodes)
    assert status["status"] == "TIMEOUT" and status["first_failure"] == "w1"
    assert "w1 (timeout, exit -1, fabric eth1 down)" in status["message"]


def test_a_node_cut_from_the_fabric_is_named_first_not_the_head_it_could_no_longer_hear():
    # Seen in the fault matrix: the cut node stopped itself for the head's silence (its own link was
    # down) and the deadline stopped the others; the head was named first for that claim.
    cut = timed_out("w1", 1, fabric(link_up=False, head_reached=False, operstate="down"))
    cut.update(state="failed", exit_code=137)
    cut["cluster_stop"] = {"node": "head", "kind": "silent", "reason": "no answer from the head head for 31 s"}
    nodes = [timed_out("head", 0, fabric(head_reached=None)), cut, timed_out("w2", 2, fabric())]
    nodes[0]["progress"], cut["progress"], nodes[2]["progress"] = {"0": 3}, {"1": 4}, {"2": 4}
    status = _run.run_status(nodes)
    assert status["status"] == "TIMEOUT" and status["first_failure"] == "w1", status["message"]
    assert "no answer from the head" not in status["message"].split("w1 (")[0]


def stopped(name, rank, about, kind="silent", reason="", state="failed"):
    stop = {"node": about, "kind": kind, "reason": reason or f"no heartbeat from {about} for 31 s", "by": "head"}
    return {"name": name, "rank": rank, "state": state, "exit_code": -15, "cluster_stop": stop}


def test_a_node_the_head_heard_nothing_from_is_named_first_with_the_heads_reason():
    """A worker's node died: it is unreachable and cannot say why; the survivors were stopped by the
    head, whose reason is the evidence."""
    nodes = [
        stopped("head", 0, "w2"),
        stopped("w1", 1, "w2"),
        {"name": "w2", "rank": 2, "state": "unreachable", "exit_code": None},
    ]
    status = _run.run_status(nodes)
    assert status["status"] == "FAILED" and status["first_failure"] == "w2"
    assert "w2 (unreachable, no heartbeat from w2 for 31 s)" in status["message"]  # no exit code came back


def test_a_head_every_worker_lost_is_named_and_a_reported_failure_adds_no_row():
    gone = "no answer from the head head for 30 s"
    nodes = [
        {"name": "head", "rank": 0, "state": "unreachable", "exit_code": None},
        stopped("w1", 1, "head", reason=gone),
        stopped("w2", 2, "head", reason=gone),
    ]
    assert _run.run_status(nodes)["first_failure"] == "head"
    # A node that said it failed is judged by its own exit and torchrun's summary, as before.
    failed = [stopped("head", 0, "w1", kind="failed"), {"name": "w1", "rank": 1, "state": "failed", "exit_code": 1}]
    assert _run.run_status(failed)["message"].count("heartbeat") == 0


def test_a_worker_that_cannot_reach_the_head_is_named_but_if_no_worker_can_the_head_is():
    one = [
        timed_out("head", 0, fabric(head_reached=None)),
        timed_out("w1", 1, fabric()),
        timed_out("w2", 2, fabric(head_reached=False)),
    ]
    status = _run.run_status(one)
    assert status["first_failure"] == "w2" and "head 10.0.0.1:29500 not reached from eth1" in status["message"]
    every = [
        timed_out("head", 0, fabric(head_reached=None)),
        timed_out("w1", 1, fabric(head_reached=False)),
        timed_out("w2", 2, fabric(head_reached=False)),
    ]
    status = _run.run_status(every)
    assert status["first_failure"] == "head" and "no worker reached 10.0.0.1:29500" in status["message"]


def test_fabric_checks_that_found_nothing_or_did_not_run_change_nothing():
    nodes = [
        {"name": "head", "rank": 0, "state": "timeout", "exit_code": -1, "progress": {"0": 4}, "fabric": fabric()},
        {"name": "w1", "rank": 1, "state": "timeout", "exit_code": -1, "progress": {"1": 3}, "fabric": None},
        {
            "name": "w2",
            "rank": 2,
            "state": "timeout",
            "exit_code": -1,
            "progress": {"2": 4},
            "fabric": {"ok": None, "error": "fabric check failed: x"},
        },
    ]
    status = _run.run_status(nodes)
    assert status["first_failure"] == "w1" and "fabric" not in status["message"]


def test_a_node_whose_output_disk_filled_fails_although_its_ranks_exited_0_and_is_named_first():
    full = {"path": "/data/out", "free_bytes": 0, "lowest_free_bytes": 0, "total_bytes": 102400, "error": ""}
    wait = {"finished": True, "status": {"outcome": "ok", "rc": 0, "disk": full, "log_tail": "ok"}}
    state = _run.node_state(wait)
    assert state["state"] == "failed" and state["exit_code"] == 0
    assert state["disk_full"] == {"path": "/data/out", "free_bytes": 0, "total_bytes": 102400, "enospc": False}
    nodes = [
        {
            "name": "head",
            "rank": 0,
            "state": "failed",
            "exit_code": 1,
            "failure": {"root_cause_rank": 0, "root_cause_exit": 1, "root_cause_time": "t1"},
        },
        {"name": "w1", "rank": 1, **state},
    ]
    status = _run.run_status(nodes)
    assert status["first_failure"] == "w1" and "disk full: /data/out had 0 B free of 100.0 KiB" in status["message"]


@pytest.mark.parametrize(
    ("disk", "tail", "full"),
    [
        ({"lowest_free_bytes": 2 << 20, "total_bytes": 1 << 30}, "", False),
        ({"lowest_free_bytes": (1 << 20) - 1, "total_bytes": 1 << 30}, "", True),
        ({"lowest_free_bytes": 5 << 30, "total_bytes": 1 << 40}, "OSError: [Errno 28] No space left on device", True),
        ({"error": "disk check failed: gone"}, "", False),
        (None, "", False),
    ],
)
def test_disk_full_from_the_lowest_free_space_or_enospc_in_the_log(disk, tail, full):
    wait = {"finished": True, "status": {"outcome": "ok", "rc": 0, "disk": disk, "log_tail": tail}}
    assert (_run.node_state(wait)["state"] == "failed") is full


def test_torchrun_failure_without_summary_is_empty():
    assert _run.torchrun_failure("all good\n") == {}


def test_node_line():
    line = _run.node_line(
        {
            "rank": 1,
            "name": "n1",
            "state": "ok",
            "exit_code": 0,
            "vpc_ip": "10.0.0.2",
            "fabric_if": "eth1",
            "log": "/r/logs/n1.log",
        }
    )
    assert "n1" in line and "ok" in line and "fabric 10.0.0.2 on eth1" in line and line.endswith("/r/logs/n1.log")
    # No exit code came back (unreachable): a dash in its column, never Python's None.
    gone = _run.node_line({"rank": 2, "name": "n2", "state": "unreachable", "exit_code": None})
    assert "exit    -" in gone and "None" not in gone
    assert _run.how_it_ended({"state": "unreachable", "exit_code": None}) == "unreachable"
    assert _run.how_it_ended({"state": "failed", "exit_code": 1}) == "failed, exit 1"


def test_setup_failure_names_every_node_whose_own_task_failed_not_the_reporter():
    setup_failure = _run.setup_failure
    # n1 and n2 unreachable: their wait failed; n0 only stopped (any_errors_fatal).
    messages = ["", "n1: Reach every node: timed out", "n2: Reach every node: refused"]
    result = setup_failure(["n0", "n1", "n2"], messages, [False, True, True])
    assert result["failed_nodes"] == ["n1", "n2"] and result["first_failure"] == "n1"
    assert result["message"] == "n1: Reach every node: timed out (setup failed on 2 nodes: n1, n2)"
    # The run_once check that names unreachable nodes fails on a healthy node: named only when alone.
    reporter = setup_failure(["n0", "n1"], ["n0: preflight[fabric]: head's listener", ""], [False, False])
    assert reporter["failed_nodes"] == ["n0"]
    mixed = setup_failure(["n0", "n1"], ["n0: preflight[ssh]: unreachable: n1", "n1: wait: refused"], [False, True])
    assert mixed["failed_nodes"] == ["n1"] and mixed["message"] == "n1: wait: refused"
    gone = setup_failure(["n0"], [""], [False])
    assert gone == {"message": "setup stopped on a node that is gone", "failed_nodes": [], "first_failure": None}
    many = setup_failure([f"n{i}" for i in range(12)], [f"n{i}: x{i}" for i in range(12)], [True] * 12)
    assert many["message"].endswith("n9 and 2 more)") and len(many["failed_nodes"]) == 12


def test_a_reason_every_node_shares_is_said_once():
    probe = "Probe every node, hold it for this run and prove the fabric"
    error = "Error response from daemon: manifest for r/p:nope not found: manifest unknown: manifest unknown"
    names = ["10.0.0.1", "10.0.0.11", "gpu-b"]
    messages = [
        f"{n}: {probe}: preflight[image]: {n}: r/p:nope is not on the node and cannot be pulled: {error}" for n in names
    ]
    every = _run.setup_failure(names, messages, [True] * 3)
    assert every == {
        "message": f"every node: {probe}: preflight[image]: r/p:nope is not on the node and cannot be pulled: {error}",
        "failed_nodes": names,
        "first_failure": "10.0.0.1",
    }
    # Not every node, another reason, or a reason that names its node elsewhere: said per node.
    assert _run.setup_failure(names, [*messages[:2], ""], [True, True, False])["message"].startswith("10.0.0.1: ")
    other = [*messages[:2], f"gpu-b: {probe}: preflight[disk]: gpu-b: 1 GiB free"]
    assert _run.setup_failure(names, other, [True] * 3)["message"].endswith(
        "(setup failed on 3 nodes: 10.0.0.1, 10.0.0.11, gpu-b)"
    )
    fabric = [f"{n}: wait: preflight[fabric]: {n} (on eth1) cannot reach the head" for n in names]
    assert _run.setup_failure(names, fabric, [True] * 3)["message"].startswith("10.0.0.1: wait: ")
    # One node is not "every node".
    assert _run.setup_failure(names[:1], messages[:1], [True])["message"] == messages[0]


def test_a_nodes_setup_failure_is_its_first_check_whole_even_where_its_msg_was_cut():
    result = {"failed": True, "msg": "preflight[image]: a: x\u2026(details in run.json)"}
    whole = "preflight[image]: a: x cannot be pulled: " + "E" * 400
    message, own = _run.node_setup_failure("a", "Probe", dict(result, failures=[whole, "preflight[disk]: a: 1 GiB"]))
    assert message == f"a: Probe: {whole} (+1 more in run.json)" and own
    assert _run.node_setup_failure("a", "Launch", {"failed": True, "msg": "no"}) == ("a: Launch: no", True)
    assert _run.first_failure([]) == "" and _run.first_failure(["x"]) == "x"


def test_a_console_line_is_cut_saying_where_the_rest_is():
    assert _run.clip("short") == "short"
    assert _run.clip("two\n lines\n") == "two lines"
    long = _run.clip("x" * 5000)
    assert len(long) == _run.MESSAGE_MAX and long.endswith("\u2026(details in run.json)")
    assert _run.clip("y" * 40, limit=30).startswith("y" * 7)


def test_the_end_table_names_only_the_nodes_that_were_not_ok_then_counts():
    ok = {"rank": 0, "name": "a", "state": "ok", "exit_code": 0, "vpc_ip": "10.0.0.1", "fabric_if": "eth1"}
    bad = {"rank": 1, "name": "b", "state": "unreachable", "exit_code": None, "vpc_ip": "10.0.0.2", "fabric_if": "eth1"}
    healthy = _run.node_table([dict(ok, rank=r, name=f"n{r}") for r in range(1000)])
    assert healthy == ["nodes: 1000 (1000 ok); fabric interface: eth1 on 1000"]
    lines = _run.node_table([ok, bad])
    assert lines == [_run.node_line(bad), "nodes: 2 (1 ok, 1 unreachable); fabric interface: eth1 on 2"]
    assert _run.node_table([ok, bad], True)[:2] == [_run.node_line(ok), _run.node_line(bad)]


def test_excluded_nodes_neither_fail_the_run_nor_count_in_it():
    nodes = [
        {"name": "n0", "rank": 0, "state": "ok"},
        {"name": "n1", "rank": None, "state": "excluded"},
        {"name": "n3", "rank": 1, "state": "ok"},
    ]
    status = _run.run_status(nodes)
    assert status["status"] == "COMPLETED" and status["failed_nodes"] == []
    assert status["message"] == "all 2 nodes completed; 1 excluded by preflight: n1"
    failed = _run.run_status([dict(nodes[0], state="failed", exit_code=1), nodes[1], nodes[2]])
    assert failed["failed_nodes"] == ["n0"] and failed["message"].endswith("; 1 excluded by preflight: n1")
    table = _run.node_table(nodes)
    assert table[-1].startswith("nodes: 3 (2 ok, 1 excluded)")


def test_the_node_the_sweep_stopped_the_run_for_is_named_first_not_the_head():
    stop = {"node": "w2", "kind": "fabric", "reason": "fabric sweep: w2 sends at 0.2 Gbit/s at best", "by": "head"}
    nodes = [
        {"name": name, "rank": rank, "state": "failed", "exit_code": None, "cluster_stop": stop}
        for rank, name in enumerate(("head", "w1", "w2"))
    ]
    status = _run.run_status(nodes)
    assert status["first_failure"] == "w2" and "fabric sweep: w2 sends at 0.2 Gbit/s" in status["message"]
    assert _run.sweep_stops(nodes) == [{"node": "w2", "text": stop["reason"]}]
    assert _run.sweep_stops([{"name": "a", "cluster_stop": {"node": "b", "kind": "silent"}}]) == []
