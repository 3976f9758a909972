# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sweep's measurement: real TCP streams between endpoints on loopback, in one process, the
secret's proof, the bounds, and the tool's choice."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep_net as net

SECRET = bytes.fromhex("22" * 32)
ROUND_S = 0.4


def plans(endpoints):
    """Each endpoint's part of the 3-node schedule, its partners' ports filled in."""
    n = len(endpoints)
    return [
        [
            dict(step, send_address="127.0.0.1", send_port=endpoints[step["send_to"]].port)
            for step in _sweep.plan(n, rank)
        ]
        for rank in range(n)
    ]


def sweep_all(endpoints, plan_of=plans, round_s=ROUND_S, late=None):
    """Every endpoint's sweep at once, each in a thread; ``late``: {rank: seconds} its plan came late."""
    start_at = time.monotonic() + 0.2
    rows = [None] * len(endpoints)
    every = plan_of(endpoints)

    def run(i):
        rows[i] = endpoints[i].run(every[i], start_at + (late or {}).get(i, 0.0), round_s)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(endpoints))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return rows, time.monotonic() - start_at


def test_three_nodes_measure_every_round_in_both_directions_within_the_bound():
    endpoints = [net.SweepEndpoint(SECRET, "run1", rank, "127.0.0.1") for rank in range(3)]
    rows, took = sweep_all(endpoints)
    bound = 2 * ROUND_S + net.MARGIN_S
    assert took <= bound + 0.3, took
    for rank, mine in enumerate(rows):
        assert [row["round"] for row in mine] == [0, 1]
        for row in mine:
            assert "error" not in row, row
            assert row["send_gbps"] > 0.1 and row["recv_gbps"] > 0.1, row
        assert [row["send_to"] for row in mine] == [(rank + 1) % 3, (rank + 2) % 3]
    assert all(e.refused == 0 for e in endpoints)


def test_the_sweep_ends_with_its_last_stream_not_at_the_last_rounds_end():
    """Every node's run() returns once its last send is answered and its last stream measured: the
    last round's send window (SEND_SHARE of it), not its end plus the margin."""
    endpoints = [net.SweepEndpoint(SECRET, "run1", rank, "127.0.0.1") for rank in range(3)]
    rows, took = sweep_all(endpoints, round_s=1.0)
    assert all("error" not in row for mine in rows for row in mine), rows
    # The streams end at 1.6 s; the rounds at 2.0 s and the old bound at 2.25 s.
    assert 1.6 <= took < 2.0, took


def test_a_peer_with_the_wrong_secret_is_refused_and_its_partner_has_no_figure_from_it():
    endpoints = [net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1"), net.SweepEndpoint(SECRET, "run1", 1, "127.0.0.1")]
    endpoints.append(net.SweepEndpoint(bytes(32), "run1", 2, "127.0.0.1"))  # knows the run, not its secret
    rows, _took = sweep_all(endpoints)
    # Node 2 sends to 0 in round 0 and to 1 in round 1: both refuse it; what 0 and 1 send each other counts.
    assert endpoints[0].refused == 1 and endpoints[1].refused == 1
    assert rows[0][0]["recv_gbps"] is None and rows[2][0]["send_gbps"] is None and "stream" in rows[2][0]["error"]
    assert rows[0][0]["send_gbps"] > 0.1 and rows[1][0]["recv_gbps"] > 0.1


def test_a_hello_replayed_or_from_another_rank_is_refused_unread():
    endpoint = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    endpoint._plan = {0: {"round": 0, "recv_from": 2}}
    good = net.hello(SECRET, "run1", 2, 0).rstrip(b"\n")
    assert endpoint._check(good) == 0
    assert endpoint._check(good) is None  # the same nonce again
    assert endpoint._check(net.hello(SECRET, "run1", 1, 0).rstrip(b"\n")) is None  # not round 0's partner
    assert endpoint._check(net.hello(SECRET, "run2", 2, 0).rstrip(b"\n")) is None  # another run
    assert endpoint._check(b"{not json") is None
    endpoint.close()


def test_a_partner_that_never_listens_costs_a_figure_not_the_bound():
    lonely = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound and not listening: connections are refused
        plan = [{"round": 0, "send_to": 1, "send_address": "127.0.0.1", "send_port": port, "recv_from": 1}]
        started = time.monotonic()
        (row,) = lonely.run(plan, started, ROUND_S)
    assert row["send_gbps"] is None and row["recv_gbps"] is None
    assert "connect to 127.0.0.1" in row["error"] and "nothing received" in row["error"]
    assert time.monotonic() - started <= ROUND_S + net.MARGIN_S + 0.3


def test_nothing_is_accepted_before_the_sweep():
    endpoint = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=1)
    endpoint.close()


def test_the_tool_auto_takes_perftest_only_with_ib_write_bw_and_an_rdma_device(tmp_path):
    device = tmp_path / "infiniband"
    device.mkdir()
    have = {"ib_write_bw": "/usr/bin/ib_write_bw"}.get
    assert net.choose_tool("auto", have, str(device)) == ("tcp", f"no RDMA device under {device}")
    (device / "mlx5_0").mkdir()
    assert net.choose_tool("auto", have, str(device))[0] == "perftest"
    assert net.choose_tool("auto", lambda _name: None, str(device)) == ("tcp", "ib_write_bw not installed")
    assert net.choose_tool("tcp", have, str(device)) == ("tcp", "asked for")
    with pytest.raises(net.SweepToolError, match="aorta_fabric_sweep_tool perftest cannot run on this node: ib_write"):
        net.choose_tool("perftest", lambda _name: None, str(tmp_path / "none"))
    with pytest.raises(net.SweepToolError, match="is not one of auto, perftest, tcp"):
        net.choose_tool("rdma", have, str(device))


PERFTEST_OUTPUT = """
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : mlx5_0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      1245600          0.00               97.91 		   0.186752
---------------------------------------------------------------------------------------
"""


def test_perftest_argv_and_its_average_read_from_its_table():
    assert net.perftest_server_argv(18515, 2) == ["ib_write_bw", "-p", "18515", "-D", "2", "--report_gbits", "-F"]
    client = net.perftest_client_argv("10.0.0.2", 18515, 2, device="mlx5_0")
    assert client == ["ib_write_bw", "-p", "18515", "-D", "2", "--report_gbits", "-F", "-d", "mlx5_0", "10.0.0.2"]
    assert net.parse_perftest(PERFTEST_OUTPUT) == 97.91
    assert net.parse_perftest("ib_write_bw: Couldn't connect to 10.0.0.2:18515") is None


def test_perftest_rounds_run_both_ends_and_read_each_figure_from_its_own_output(tmp_path, monkeypatch):
    # No RDMA device on this machine: an ib_write_bw that prints perftest's table (the client one figure,
    # the server another) proves the rounds' orchestration, not RDMA.
    fake = tmp_path / "ib_write_bw"
    table = PERFTEST_OUTPUT.replace("97.91", "$rate")
    fake.write_text(f'#!/bin/sh\ncase "$*" in *10.0.0.*) rate=41.5 ;; *) rate=39.25 ;; esac\ncat <<EOF\n{table}EOF\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    endpoint = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    plan = [{"round": 0, "send_to": 1, "send_address": "10.0.0.2", "send_port": 4000, "recv_from": 1}]
    (row,) = endpoint.run_perftest(plan, time.monotonic(), 2.0)
    assert row == {"round": 0, "send_to": 1, "send_gbps": 41.5, "recv_from": 1, "recv_gbps": 39.25}


def test_a_peer_that_connects_and_says_nothing_does_not_hold_up_the_rounds_stream():
    endpoints = [net.SweepEndpoint(SECRET, "run1", rank, "127.0.0.1") for rank in range(3)]
    silent = []

    def plans_with_a_silent_peer(eps):
        every = plans(eps)

        # Connect to node 1 as soon as it listens, and say nothing, before round 0's real stream.
        def hang():
            for _attempt in range(40):
                try:
                    silent.append(socket.create_connection(("127.0.0.1", eps[1].port), timeout=1))
                    return
                except OSError:
                    time.sleep(0.01)

        threading.Thread(target=hang, daemon=True).start()
        return every

    rows, _took = sweep_all(endpoints, plans_with_a_silent_peer)
    assert silent, "the silent peer never connected"
    assert rows[1][0]["recv_gbps"] is not None and rows[1][0]["recv_gbps"] > 0.1, rows[1]
    assert endpoints[1].refused == 1  # no hello within HELLO_WAIT_S
    for sock in silent:
        sock.close()


def slow_partner(bytes_per_s, window_end):
    """A partner that takes the hello, drains the stream at ``bytes_per_s`` and, as a sweep endpoint
    does, answers what it got at the window's end (a link slower than one chunk in what is left of
    the send window, with the sender's buffer still full then)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve():
        conn, _peer = server.accept()
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.makefile("rb").readline()
            got = 0
            while time.monotonic() < window_end:
                got += len(conn.recv(4096))
                time.sleep(4096 / bytes_per_s)
            conn.sendall(b'{"bytes": %d}\n' % got)

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_a_link_slower_than_a_chunk_in_the_window_gives_a_low_figure_not_a_lost_one():
    start = time.monotonic()
    server = slow_partner(1_000_000, start + net.SEND_SHARE * 1.0)  # 8 Mbit/s
    sender = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    port = server.getsockname()[1]
    plan = [{"round": 0, "send_to": 1, "send_address": "127.0.0.1", "send_port": port, "recv_from": 1}]
    (row,) = sender.run(plan, start, 1.0)
    server.close()
    # At most the partner's 8 Mbit/s (its sleeps make it slower), and a figure: low, not lost.
    assert row["send_gbps"] is not None and 0.0002 < row["send_gbps"] <= 0.008, row


def test_a_plan_that_arrives_after_the_rounds_window_gives_no_figure_rather_than_zero():
    sender = net.SweepEndpoint(SECRET, "run1", 0, "127.0.0.1")
    plan = [{"round": 0, "send_to": 1, "send_address": "127.0.0.1", "send_port": 9, "recv_from": 1}]
    (row,) = sender.run(plan, time.monotonic() - 0.9, 1.0)
    assert row["send_gbps"] is None and row["error"].startswith("the round's window had passed"), row


@pytest.mark.parametrize("late", [0.15, 0.3])
def test_a_node_whose_plan_came_late_is_not_read_as_slow(late):
    """The stand-in's false slow link (seen twice: a healthy node's send at 0.49x): its plan reached
    it 0.3 of a round late, and the sender's time to the answer counted its partner's wait. Each figure
    is now bytes over the receiver's span of the stream, whichever end was late."""
    round_s = 1.0
    endpoints = [net.SweepEndpoint(SECRET, "run1", rank, "127.0.0.1") for rank in range(3)]
    rows, _took = sweep_all(endpoints, round_s=round_s, late={2: late * round_s})
    measurements = []
    for r in range(2):
        measurements.append(
            [
                {
                    "sender": rank,
                    "receiver": row["send_to"],
                    "send_gbps": row.get("send_gbps"),
                    "recv_gbps": next(x for x in rows[row["send_to"]] if x["round"] == r).get("recv_gbps"),
                }
                for rank, mine in enumerate(rows)
                for row in mine
                if row["round"] == r
            ]
        )
    found = _sweep.localise(measurements, nodes=3)
    assert found["slow"] == [], found["nodes"]
    # The late node's own sends and receives read like the others' (before: its send 0.485x the median).
    assert found["nodes"]["2"]["send_ratio"] > 0.7 and found["nodes"]["2"]["recv_ratio"] > 0.7, found["nodes"]


def test_a_stream_that_stalls_before_the_windows_end_reads_slow():
    """A lossy or flapping link: the sender's bytes stop arriving early in the window while its
    connection stays open. The stall is the link's time: the figure is bytes over the window, not over
    the first to the last byte (which would read the stalled link as fast as a healthy one)."""
    round_s = 0.6
    receiver = net.SweepEndpoint(SECRET, "run1", 1, "127.0.0.1")
    start_at = time.monotonic() + 0.2
    plan = [{"round": 0, "shift": 1, "send_to": 0, "recv_from": 0}]
    done = {}
    thread = threading.Thread(target=lambda: done.update(rows=receiver.run(plan, start_at, round_s)))
    thread.start()
    time.sleep(max(0.0, start_at - time.monotonic()) + 0.02)
    with socket.create_connection(("127.0.0.1", receiver.port)) as conn:
        conn.sendall(net.hello(SECRET, "run1", 0, 0))
        conn.sendall(bytes(4 * net.CHUNK))  # a short burst, then nothing until the window's end
        time.sleep(net.SEND_SHARE * round_s)
        answer = json.loads(conn.makefile("rb").readline(net.HELLO_MAX))
    thread.join(5)
    assert answer["bytes"] == 4 * net.CHUNK
    assert answer["seconds"] >= 0.8 * (net.SEND_SHARE * round_s - 0.02), answer
