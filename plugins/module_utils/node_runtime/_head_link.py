# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each supervisor's side of the head's aggregator (target side, standard library only): on the
head, ``HeadLink`` serves the ``_aggregator.Aggregator`` over UDP in a thread and ``HeadWatch`` is
the head's own supervisor's view of it; on a worker, ``WorkerLink`` sends the reports and
``WorkerWatch`` is its supervisor's view. See ``_aggregator`` for the datagrams and their proof.

Private to this collection. Runs on the node's Python (>= 3.9 syntax).

The join (every node reports before any rank starts, and the fabric sweep runs in it) costs what
it waits for, not fixed ticks: a node between two join reports wakes at once when its sweep figures
are ready (and reports them), and the head sends every worker the join's end (the go, or a stop)
unasked the moment it is decided (``Aggregator.pushes``), so no node waits for its next report to
learn it. A lost push costs that wait and nothing more.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._aggregator import (
    AGGREGATE_EVERY_S,
    MAX_DATAGRAM,
    Refused,
    open_sealed,
    read_stop_request,
    seal,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import (
    FINAL_REPORT_TRIES,
    REPLY_WAIT_S,
)

JOIN_POLL_S = 0.5  # how often a node waiting for every node to join asks again
PAUSE_SLICE_S = 0.05  # within a join poll, how often a node looks at its sweep's figures


def _family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class HeadLink:
    """The aggregator served on the head's fabric address in a thread of the head's supervisor.

    ``report()`` is the head's own report (no network); ``close()`` stops the thread."""

    def __init__(self, aggregator, address, port, aggregate_path=None, clock=time.monotonic, write=None):
        self.aggregator = aggregator
        self.clock = clock
        self.aggregate_path = aggregate_path
        self._write = write
        self.lock = threading.Lock()
        self.sock = socket.socket(_family(address), socket.SOCK_DGRAM)
        self.sock.bind((address, int(port)))  # the fabric address only: no other interface listens
        self.sock.settimeout(0.5)
        self._closed = threading.Event()
        self.join_ended = threading.Event()  # the go or a stop before it: sent to every worker
        self.reported_pushes = 0  # the pushes decided by the head's own last report
        self.thread = threading.Thread(target=self._serve, name="aorta-aggregator", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _serve(self):
        last_written = None
        while not self._closed.is_set():
            try:
                data, peer = self.sock.recvfrom(MAX_DATAGRAM + 1)
            except socket.timeout:
                data = None
            except OSError:
                if self._closed.is_set():
                    return
                data = None
            now = self.clock()
            with self.lock:
                reply = self.aggregator.receive(data, now, peer) if data is not None else None
                self.aggregator.tick(now)
                pushes = self.aggregator.pushes(now)
                due = last_written is None or now - last_written >= AGGREGATE_EVERY_S
                view = self.aggregator.aggregate(now) if due else None
            if reply is not None:
                with contextlib.suppress(OSError):  # the worker asks again with its next report
                    self.sock.sendto(reply, peer)
            self._push(pushes)
            if view is not None:
                self.write_aggregate(view)
                last_written = now

    def write_aggregate(self, view=None):
        if not self.aggregate_path or self._write is None:
            return
        if view is None:
            with self.lock:
                view = self.aggregator.aggregate(self.clock())
        with contextlib.suppress(OSError):  # informs the controller; never decides the run
            self._write(self.aggregate_path, view)

    def report(self, body):
        now = self.clock()
        with self.lock:
            answer = self.aggregator.report(self.aggregator.head, body, now)
            pushes = self.aggregator.pushes(now)
            self.reported_pushes = len(self.aggregator.pushed)  # what the head's answer already holds
        self._push(pushes)
        return answer

    def _push(self, pushes):
        """Send the sweep's plan or the join's end to every worker unasked (from whichever thread
        decided it); the head's own join wakes on it too."""
        for peer, datagram in pushes:
            with contextlib.suppress(OSError):  # that worker learns it from its next report
                self.sock.sendto(datagram, peer)
        if "end" in self.aggregator.pushed:
            self.join_ended.set()

    def pushed(self):
        """How many pushes were decided (the sweep's plan, the join's end): the head wakes on each."""
        return len(self.aggregator.pushed)

    def settled(self):
        with self.lock:
            return self.aggregator.settled()

    def close(self):
        self._closed.set()
        self.thread.join(2)
        self.sock.close()
        self.write_aggregate()


class WorkerLink:
    """A worker's side: each report goes to the head; the reply says whether to stop.

    ``report()`` returns the head's answer, or None when it did not answer this time; ``silent_s()``
    how long since the head last answered (from the link's start until its first answer)."""

    def __init__(self, secret, run_id, node, head_address, port, clock=time.monotonic):
        self.secret, self.run_id, self.node = secret, run_id, node
        self.target = (head_address, int(port))
        self.clock = clock
        self.seq = 0
        self._taken = set()
        self.sock = socket.socket(_family(head_address), socket.SOCK_DGRAM)
        self.sock.connect(self.target)  # replies from any other address never reach recv()
        self.last_answer = self.clock()
        self.answered = False

    def report(self, body, wait=REPLY_WAIT_S):
        self.seq += 1
        self._taken = set()  # the answers taken to this report: its reply, each push once
        try:
            self.sock.send(seal(self.secret, self.run_id, self.node, self.seq, body))
        except OSError:
            return None  # no route, refused: the same as no answer
        return self._answer(wait)

    def wait_push(self, seconds):
        """The head's answer to this node's last report sent unasked (the sweep's plan or the
        join's end, see ``Aggregator.pushes``) if it comes within ``seconds``, else None."""
        return self._answer(seconds)

    def _answer(self, seconds):
        """The head's answer to this node's last report within ``seconds``, or None; anything else
        that arrives (a late answer to an earlier report, a replay, a forgery) is passed over."""
        end = self.clock() + seconds
        while True:
            left = end - self.clock()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(MAX_DATAGRAM + 1)
            except (socket.timeout, OSError):
                return None
            try:
                _head, got, answer = open_sealed(self.secret, self.run_id, data)
            except Refused:
                continue
            if got != self.seq:
                continue  # a late answer to an earlier report (or a replayed one)
            kind = answer.get("push") or "reply"
            if kind in self._taken:
                continue  # the same answer again (a duplicated or replayed datagram): taken once
            self._taken.add(kind)
            self.last_answer = self.clock()
            self.answered = True
            return answer

    def silent_s(self):
        return self.clock() - self.last_answer

    def close(self):
        self.sock.close()


def _joining(sweep):
    """A join report: with this node's sweep endpoint, then its figures, while the sweep is on."""
    body = {"state": "joining", "finished": False}
    if sweep is not None:
        body.update(sweep.fields())
    return body


def _figures_due(sweep):
    """Whether this node's sweep figures are ready and not yet reported."""
    return sweep is not None and sweep.figures_due()


def _follow(sweep, answer):
    """The head's answer to a join report, for this node's side of the sweep; on the go, the
    measurement is over (bounded: its thread ends by its last round's end) and its port closed."""
    if sweep is None or answer is None:
        return
    sweep.follow(answer)
    if answer.get("go") or answer.get("stop"):
        sweep.finish()


def _stop_of(answer, by):
    if not answer or not answer.get("stop"):
        return None
    return {"node": answer.get("node"), "kind": answer.get("kind"), "reason": answer.get("reason") or "", "by": by}


class HeadWatch:
    """What the head's supervisor asks: its own reports go to the aggregator without the network;
    after its own end it keeps serving the others (``waiting()``) until every node has ended or
    gone silent, or ``linger_s`` has passed."""

    role = "head"
    join_stop = None  # the head's stop that ended the join, if one did

    def __init__(self, link, linger_s, clock=time.monotonic, stop_path=None, orphan=None, sweep=None):
        self.link, self.linger_s, self.clock = link, float(linger_s), clock
        self.linger_end = None
        self.sweep = sweep  # this node's side of the fabric sweep (_sweep_phase.Participant), None: off
        self.stop_path = stop_path  # the controller's stop request (stop_request_path)
        self.orphan = orphan  # no controller watching for too long (Orphan), None: never asked

    def _controller_stop(self, orphan=True):
        """Take the controller's stop request into the aggregator once it is there, or, once the
        ranks started (``orphan``), the orphan's: no controller has watched the run for
        aorta_orphan_grace_seconds."""
        reason = read_stop_request(self.stop_path)
        if reason is None and orphan and self.orphan is not None:
            reason = self.orphan.reason()
        if reason is not None:
            with self.link.lock:
                self.link.aggregator.request_stop(reason, self.clock())

    def join(self):
        """'' once every node has joined; else why the head must not launch. Bounded by the
        aggregator itself: a node not heard from within its join timeout stops the run."""
        self.link.start()
        while True:
            self._controller_stop(orphan=False)
            answer = self.link.report(_joining(self.sweep))
            _follow(self.sweep, answer)
            stop = _stop_of(answer, "head")
            if stop:
                self.join_stop = stop
                return f"the run stopped before its ranks started: {stop['reason']}"
            if answer.get("go"):
                if self.orphan is not None:  # the controller's watch starts once every node launched
                    self.orphan.since = self.orphan.wall()
                return ""
            self._pause()

    def _pause(self):
        """Until the next join report: JOIN_POLL_S, or less once a worker's report set the sweep's
        plan or ended the join (the head pushed it to the workers: its own report takes it now),
        or once this node's sweep figures are ready to report."""
        end = self.clock() + JOIN_POLL_S
        seen = self.link.reported_pushes
        while not _figures_due(self.sweep) and self.link.pushed() == seen:
            left = end - self.clock()
            if left <= 0 or self.link.join_ended.wait(min(left, PAUSE_SLICE_S)):
                return

    def beat(self, body):
        self._controller_stop()
        return _stop_of(self.link.report(body), "head")

    def sweep_record(self):
        """This node's fabric sweep for its status, with the cluster's (``cluster``) on the head."""
        record = self.sweep.record() if self.sweep is not None else None
        sweep = self.link.aggregator.sweep
        if record is not None and sweep is not None:
            with self.link.lock:
                record["cluster"] = sweep.summary()
        return record

    def finish(self, body):
        self.link.report(body)
        self.linger_end = self.clock() + self.linger_s

    def waiting(self):
        self._controller_stop()
        with self.link.lock:
            self.link.aggregator.tick(self.clock())
        return not self.link.settled() and self.clock() < self.linger_end

    def silent(self):
        """The nodes the head counts as gone, with why (for the status and the controller)."""
        with self.link.lock:
            return dict(self.link.aggregator.silent)

    def close(self):
        self.link.close()


class WorkerWatch:
    """What a worker's supervisor asks: the head's answer to each report, and whether the head has
    gone quiet for ``heartbeat_timeout`` seconds (then the node stops itself: its rendezvous is gone)."""

    role = "worker"
    join_stop = None  # the head's stop that ended the join, if one did

    def __init__(self, link, head, heartbeat_timeout, join_timeout, clock=time.monotonic, sweep=None):
        self.link, self.head = link, head
        self.sweep = sweep  # this node's side of the fabric sweep (_sweep_phase.Participant), None: off
        self.heartbeat_timeout, self.join_timeout = float(heartbeat_timeout), float(join_timeout)
        self.clock = clock

    def join(self):
        """'' once the head says every node has joined (go); else why this node must not launch:
        the fabric message when the head never answered, the head's stop, or the head gone quiet."""
        end = self.clock() + self.join_timeout
        answer = self.link.report(_joining(self.sweep))
        while True:
            _follow(self.sweep, answer)
            if answer is not None:
                stop = _stop_of(answer, "head")
                if stop:
                    self.join_stop = stop
                    return f"the head stopped the run before this node launched: {stop['reason']}"
                if answer.get("go"):
                    return ""
            elif not self.link.answered and self.clock() >= end:
                address, port = self.link.target
                return (
                    f"fabric: the head {self.head}'s aggregator at {address}:{port}/udp did not answer in "
                    f"{self.join_timeout:.0f} s (is UDP to the rendezvous port open on the fabric?)"
                )
            elif self.link.answered and self.link.silent_s() >= self.heartbeat_timeout:
                return f"no answer from the head {self.head} for {self.link.silent_s():.0f} s while waiting to launch"
            answer = self._pause()
            if answer is None:
                answer = self.link.report(_joining(self.sweep))

    def _pause(self):
        """Until the next join report: JOIN_POLL_S, or less once this node's sweep figures are
        ready to report; the head's answer when it sends the join's end unasked, else None."""
        end = self.clock() + JOIN_POLL_S
        while not _figures_due(self.sweep):
            left = end - self.clock()
            if left <= 0:
                return None
            pushed = self.link.wait_push(min(left, PAUSE_SLICE_S))
            if pushed is not None:
                return pushed
        return None

    def sweep_record(self):
        """This node's fabric sweep for its status."""
        return self.sweep.record() if self.sweep is not None else None

    def beat(self, body):
        stop = _stop_of(self.link.report(body), "head")
        if stop is None and self.link.silent_s() >= self.heartbeat_timeout:
            reason = f"no answer from the head {self.head} for {self.link.silent_s():.0f} s"
            stop = {"node": self.head, "kind": "silent", "reason": reason, "by": "self"}
        return stop

    def finish(self, body):
        for _attempt in range(FINAL_REPORT_TRIES):  # a lost datagram is asked again; a gone head is not waited for
            if self.link.report(body) is not None:
                break

    @staticmethod
    def waiting():
        return False

    @staticmethod
    def silent():
        return {}

    def close(self):
        self.link.close()
