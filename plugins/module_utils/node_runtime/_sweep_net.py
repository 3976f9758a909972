# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric sweep's measurement on one node: TCP streams over the fabric address, and which tool
the node can run (target side, standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax), in the supervisor's join,
in a thread beside its reports to the head (``_sweep_phase.Participant``).

Why TCP by default: every node has it, on the address the training's own traffic takes (the vpc_ip);
a link that came up at a lower speed, drops packets or is throttled by pause frames shows in a
stream's rate as in a collective's. RDMA perftest (``ib_write_bw``) measures the RDMA path RCCL
takes; ``choose_tool`` takes it where it is installed and an RDMA device is there.

Why the port is reserved at the start and listened on only during the sweep: the head hands every
node its partners' ports in the plan, and nothing is accepted before or after the sweep. A stream
starts with one line, a hello proving the run's secret (HMAC-SHA256 of the run id, the sender's
rank, the round and a fresh nonce); a hello that is oversized, not JSON, of another run, forged,
from a node that is not the round's partner, or replayed is refused unread (counted in
``refused``). At the end of the round's send window the receiver answers the sender with the
bytes it got by then and the span from its first byte to the stream's end (its EOF, or the window's
end: a stall before it counts), so the sender's figure is bytes
the receiver confirmed over the time they took to arrive (a kernel send buffer does not inflate it,
on a slow link what is still in it does not delay the answer: the sender drops it with a reset; and
a schedule skewed between the two ends, a plan that reached one of them late, does not count the
other's wait as the link's: the sender's own time to the answer is the figure's bound only where
the span is missing or longer); the receiver's is bytes over the same span.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._supervisor import (
    kill_group,
    spawn,
    wait_for_exit,
)

HELLO_MAX = 1024  # a hello is about 200 bytes; a longer line is refused unread
CHUNK = 256 * 1024
SEND_SHARE = 0.6  # of each round: the stream; the rest is the connection, the answer and the slack
CONNECT_SHARE = 0.2  # of each round: how long a sender retries a partner not listening yet
SERVING = 16  # connections served at once; more are refused (one per round is expected)
HELLO_WAIT_S = 1.0  # the longest a connection may take to send its hello
MIN_STREAM_S = 0.05  # a send window shorter than this gives no figure (a late plan)
MARGIN_S = 0.5  # past the last round, the most run() takes to hand back its figures
TOOLS = ("auto", "perftest", "tcp")


class SweepToolError(ValueError):
    """The sweep's tool asked for cannot run on this node."""


def choose_tool(wanted, which=shutil.which, rdma_dir="/sys/class/infiniband"):
    """(tool, why): the measurement this node runs, ``tcp`` or ``perftest``, and why that one."""
    if wanted not in TOOLS:
        raise SweepToolError(f"aorta_fabric_sweep_tool {wanted!r} is not one of {', '.join(TOOLS)}")
    if wanted == "tcp":
        return "tcp", "asked for"
    missing = []
    if not which("ib_write_bw"):
        missing.append("ib_write_bw not installed")
    try:
        devices = os.listdir(rdma_dir)
    except OSError:
        devices = []
    if not devices:
        missing.append(f"no RDMA device under {rdma_dir}")
    if not missing:
        return "perftest", "ib_write_bw and an RDMA device are here"
    if wanted == "perftest":
        raise SweepToolError(f"aorta_fabric_sweep_tool perftest cannot run on this node: {'; '.join(missing)}")
    return "tcp", "; ".join(missing)


def _canonical(run_id, rank, round_index, nonce):
    return json.dumps([run_id, rank, round_index, nonce], separators=(",", ":")).encode()


def hello(secret, run_id, rank, round_index):
    """The line a sender opens its stream with."""
    nonce = os.urandom(16).hex()
    mac = hmac.new(secret, _canonical(run_id, rank, round_index, nonce), hashlib.sha256).hexdigest()
    line = {"run": run_id, "rank": rank, "round": round_index, "nonce": nonce, "mac": mac}
    return json.dumps(line).encode() + b"\n"


def _gbps(nbytes, seconds):
    return round(nbytes * 8 / max(seconds, 0.001) / 1e9, 3)


def _family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class SweepEndpoint:
    """One node's end of the sweep: its reserved port, its listener during the sweep, its streams."""

    def __init__(self, secret, run_id, rank, address, clock=time.monotonic, sleep=time.sleep):
        self.secret, self.run_id, self.rank, self.address = secret, run_id, rank, address
        self.clock, self.sleep = clock, sleep
        # No SO_REUSEADDR: on Linux another socket with it could bind the same port while it is reserved.
        self.sock = socket.socket(_family(address), socket.SOCK_STREAM)
        self.sock.bind((address, 0))  # reserved, not listening: nothing is accepted before the sweep
        self.port = self.sock.getsockname()[1]
        self.refused = 0
        self.received = {}  # round -> {"from", "bytes", "seconds"}
        self._nonces = set()
        self._claimed = set()
        self._plan = {}
        self._start_at, self._round_s = 0.0, 0.0
        self._expected = set()  # the rounds in which a partner sends to this node
        self._served = threading.Event()  # every expected stream measured and answered
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def close(self):
        self._closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept() at once (Linux)
        with contextlib.suppress(OSError):
            self.sock.close()

    # --- receiving ---

    def _check(self, line):
        """The round of an authentic hello from that round's partner, or None (refused)."""
        try:
            got = json.loads(line)
            want = _canonical(self.run_id, got["rank"], got["round"], got["nonce"])
            mac = hmac.new(self.secret, want, hashlib.sha256).hexdigest()
            good = (
                got["run"] == self.run_id
                and hmac.compare_digest(mac, str(got["mac"]))
                and self._plan.get(got["round"], {}).get("recv_from") == got["rank"]
            )
        except (ValueError, KeyError, TypeError):
            return None
        with self._lock:
            if not good or got["nonce"] in self._nonces or got["round"] in self._claimed:
                return None
            self._nonces.add(got["nonce"])
            self._claimed.add(got["round"])  # one stream per round: a second one is refused
        return got["round"]

    def _serve(self, conn, until):
        """One incoming stream: the hello, the bytes to EOF, the answer."""
        with conn:
            # A peer that sends no hello holds the listener for a second at most, not the round.
            conn.settimeout(max(0.05, min(HELLO_WAIT_S, until - self.clock())))
            line = b""
            try:
                while not line.endswith(b"\n") and len(line) <= HELLO_MAX:
                    piece = conn.recv(1)
                    if not piece:
                        break
                    line += piece
            except OSError:  # no hello in time: refused like a bad one
                line = b""
            round_index = self._check(line) if line.endswith(b"\n") else None
            if round_index is None:
                with self._lock:
                    self.refused += 1
                return
            window_end = self._window_end(round_index)
            total, first, last = 0, None, None
            try:
                while self.clock() < window_end:
                    conn.settimeout(max(0.01, window_end - self.clock()))
                    data = conn.recv(CHUNK)
                    if not data:
                        break
                    now = self.clock()
                    first = now if first is None else first
                    last = now
                    total += len(data)
            except socket.timeout:
                pass  # the window's end: what arrived by then is the figure
            # From the first byte to when the stream ended (EOF) or the window closed, not to the last
            # byte: a stall at the window's end (a lossy link's retransmit back-off, a link that
            # flapped) is the link's time, and a sender that started late is not counted idle.
            ended = min(self.clock(), window_end)
            seconds = (max(ended, last) - first) if first is not None else 0.0
            with self._lock:
                self.received[round_index] = {"bytes": total, "seconds": seconds}
                if self._expected <= set(self.received):
                    self._served.set()
            # Answered at the window's end, not at the stream's: on a slow link what is still in the
            # sender's buffer would hold the answer past the round (the sender then drops it).
            conn.sendall(json.dumps({"bytes": total, "seconds": seconds}).encode() + b"\n")
            with contextlib.suppress(OSError):
                conn.settimeout(max(0.01, until - self.clock()))
                while conn.recv(CHUNK):
                    pass

    def _window_end(self, round_index):
        """When round ``round_index``'s stream ends on this node's clock."""
        return self._start_at + (round_index + SEND_SHARE) * self._round_s

    def _accept(self, until):
        """Each connection in a thread of its own (at most SERVING at once): a peer that connects and
        says nothing does not hold up the round's real stream."""
        serving = []
        while not self._closed.is_set() and self.clock() < until:
            try:  # close() may come from run() at any moment: then the socket is gone
                self.sock.settimeout(max(0.05, min(0.2, until - self.clock())))
                conn, _peer = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            serving = [thread for thread in serving if thread.is_alive()]
            if len(serving) >= SERVING:
                conn.close()
                with self._lock:
                    self.refused += 1
                continue
            thread = threading.Thread(target=self._serve_quietly, args=(conn, until), daemon=True)
            thread.start()
            serving.append(thread)
        for thread in serving:
            thread.join(max(0.0, until - self.clock()) + 0.1)

    def _serve_quietly(self, conn, until):
        with contextlib.suppress(OSError, ValueError):
            self._serve(conn, until)

    # --- sending ---

    def _connect(self, step, deadline):
        target = (step["send_address"], int(step["send_port"]))
        while True:
            try:
                return socket.create_connection(target, timeout=max(0.05, deadline - self.clock()))
            except OSError as exc:
                if self.clock() >= deadline:
                    raise exc
                self.sleep(0.02)

    def _send(self, step, begin, round_s):
        """One outgoing stream: (gbps or None, error or '')."""
        if not step.get("send_address") or not step.get("send_port"):
            return None, "no endpoint for the partner"
        stop = begin + SEND_SHARE * round_s
        if self.clock() >= stop - MIN_STREAM_S:
            # The plan came too late for this round's window: no figure rather than a false 0.
            return None, "the round's window had passed when its plan arrived"
        try:
            conn = self._connect(step, begin + CONNECT_SHARE * round_s)
        except OSError as exc:
            return None, f"connect to {step['send_address']}:{step['send_port']}: {exc}"
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            started, span = self.clock(), None
            try:
                conn.sendall(hello(self.secret, self.run_id, self.rank, step["round"]))
                self._stream(conn, stop)
                # The stream's end, said: the receiver's span ends at this EOF (queued behind what the
                # kernel still holds), not at its own window's end, which a receiver whose plan came
                # late would otherwise count idle.
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(max(0.05, begin + round_s - self.clock()))
                answer = conn.makefile("rb").readline(HELLO_MAX)
                took = self.clock() - started
                answered = json.loads(answer)
                got = answered["bytes"]
                # The receiver's own span of the stream, first to last byte: a sender whose plan came
                # late (or a receiver that listened late) does not count the other's idle time as the
                # link's (measured: 0.3 s of skew in 1 s rounds read a healthy node's send at 0.485x).
                span = answered.get("seconds")
                # What is still unsent is dropped (a reset, not a flush): it would run into the next round.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                return None, f"stream to {step['send_address']}:{step['send_port']}: {str(exc) or 'no answer'}"
        if not isinstance(got, int) or got <= 0:
            return None, f"{step['send_address']}:{step['send_port']} received nothing"
        if isinstance(span, (int, float)) and not isinstance(span, bool) and MIN_STREAM_S <= span <= took:
            took = span
        return _gbps(got, took), ""

    def _stream(self, conn, stop):
        """Send until ``stop``. A send still blocked at ``stop`` (a link slower than a chunk in what
        is left of the window) ends the stream: what the receiver got is the figure, not a loss."""
        payload = bytes(CHUNK)
        try:
            while self.clock() < stop:
                conn.settimeout(max(0.05, stop - self.clock()))
                conn.sendall(payload)
        except socket.timeout:
            pass

    def run(self, plan, start_at, round_s):
        """Measure every round of ``plan`` from ``start_at`` (this node's clock); per round its
        figures, ``error`` where one is missing. Returns once its last send is answered and every
        stream sent to it is measured (the last round's send window, not the round's end: the rest
        of a round is slack for a late stream), at the latest by the last round's end + MARGIN_S."""
        self._plan = {step["round"]: step for step in plan}
        self._expected = {step["round"] for step in plan if step.get("recv_from") is not None}
        if not self._expected:
            self._served.set()
        self._start_at, self._round_s = start_at, round_s
        end = start_at + len(plan) * round_s
        wait = start_at - self.clock() - 0.05
        if wait > 0:
            self.sleep(wait)
        self.sock.listen(16)
        listener = threading.Thread(target=self._accept, args=(end + MARGIN_S / 2,), daemon=True)
        listener.start()
        sent = []
        for index, step in enumerate(plan):
            begin = start_at + step["round"] * round_s
            if begin > self.clock():
                self.sleep(begin - self.clock())
            sent.append(self._send(step, begin, round_s))
            left = begin + round_s - self.clock()
            if left > 0 and index < len(plan) - 1:  # the next round starts on the schedule
                self.sleep(left)
        self._served.wait(max(0.0, end + MARGIN_S / 2 - self.clock()))
        self.close()  # wakes the listener, which waits for the connections it still serves
        listener.join(max(0.0, end + MARGIN_S - self.clock()))
        return [self._row(step, send, error) for step, (send, error) in zip(plan, sent)]

    def run_perftest(self, plan, start_at, round_s):
        """The same rounds with RDMA perftest: in each, this node's ``ib_write_bw`` server on its
        port and its client to the round's partner, each figure read from its own end's output.
        ib_write_bw binds the port itself (so the reservation is let go first) and has no
        authentication of its own: its server listens for the round's seconds only."""
        self.close()
        seconds = max(1, int(SEND_SHARE * round_s))
        rows = []
        with tempfile.TemporaryDirectory(prefix="aorta-sweep-") as work:
            for step in plan:
                begin = start_at + step["round"] * round_s
                if begin > self.clock():
                    self.sleep(begin - self.clock())
                rows.append(self._perftest_round(step, begin, round_s, seconds, work))
        return rows

    def _perftest_round(self, step, begin, round_s, seconds, work):
        outputs = {end: os.path.join(work, f"{end}-{step['round']}.out") for end in ("server", "client")}
        pids = {"server": spawn(perftest_server_argv(self.port, seconds), outputs["server"])}
        self.sleep(min(0.2 * round_s, 0.5))  # the partner's server is up by then
        if step.get("send_address") and step.get("send_port"):
            argv = perftest_client_argv(step["send_address"], step["send_port"], seconds)
            pids["client"] = spawn(argv, outputs["client"])
        for pid in pids.values():
            if wait_for_exit(pid, max(0.05, begin + round_s - self.clock())) is None:
                kill_group(pid, signal.SIGKILL)
                wait_for_exit(pid, 1.0)
        figures = {}
        for end, path in outputs.items():
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    figures[end] = parse_perftest(handle.read())
            except OSError:
                figures[end] = None
        send, recv = figures["client"], figures["server"]
        row = {"round": step["round"], "send_to": step["send_to"], "send_gbps": send}
        row.update(recv_from=step["recv_from"], recv_gbps=recv)
        if send is None or recv is None:
            row["error"] = "ib_write_bw gave no figure for " + " and ".join(
                end for end, gbps in (("sending", send), ("receiving", recv)) if gbps is None
            )
        return row

    def _row(self, step, send, error):
        with self._lock:
            got = self.received.get(step["round"])
        recv = _gbps(got["bytes"], got["seconds"]) if got and got["bytes"] else None
        row = {
            "round": step["round"],
            "send_to": step["send_to"],
            "send_gbps": send,
            "recv_from": step["recv_from"],
            "recv_gbps": recv,
        }
        errors = [e for e in (error, "" if recv is not None else "nothing received in the round") if e]
        if errors:
            row["error"] = "; ".join(errors)[:200]
        return row


def perftest_server_argv(port, seconds, device=None):
    """``ib_write_bw``'s server for one round (not yet run on RDMA hardware in this collection's tests)."""
    argv = ["ib_write_bw", "-p", str(port), "-D", str(seconds), "--report_gbits", "-F"]
    return argv + (["-d", device] if device else [])


def perftest_client_argv(address, port, seconds, device=None):
    """``ib_write_bw``'s client to the server at ``address`` (not yet run on RDMA hardware here)."""
    return [*perftest_server_argv(port, seconds, device), address]


def parse_perftest(output):
    """The BW average column (Gbit/s) of ib_write_bw's result table, or None."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "BW average" in line and "#bytes" in line:
            for row in lines[i + 1 :]:
                cells = row.split()
                if len(cells) >= 4:
                    try:
                        return float(cells[3])
                    except ValueError:
                        return None
    return None
