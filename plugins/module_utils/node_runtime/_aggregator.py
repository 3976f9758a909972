# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The head watches the run: every node's supervisor reports to an aggregator on the head
(target side, standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax).

Why UDP on the head's fabric address, at the rendezvous port's number: one socket on the head
whatever the node count (no open file per node at 1000 nodes), no listener on any worker, and a
worker that cannot reach it learns so before its ranks start. A report is one datagram; a lost one
is covered by the next (every ``_time_bounds.HEARTBEAT_S``).

Every datagram, both ways, is JSON ``{"v", "run", "node", "seq", "body", "mac"}`` where ``mac`` is
HMAC-SHA256 over (run id, node, sequence number, body), keyed by the run's secret. The aggregator
refuses (and counts) anything oversized, not JSON, of another run or node, unauthenticated, or not
newer than the last accepted sequence number of its node (a replay); a worker accepts only a reply
to the sequence number it just sent. The secret is never written anywhere: not in the aggregate,
not in a status file.

No rank starts anywhere until every node has joined: the head's answer carries ``go`` once every
node has reported, and each supervisor (the head's too) launches only then. A node that fails its
own launch step therefore costs the others nothing but a wait: no rendezvous, no partial start.

``Aggregator`` is the state machine (no sockets; the clock is passed in) that decides when the run
must stop: a node that reports a failure, or whose reports stop for ``heartbeat_timeout`` seconds
(or that never reports within ``join_timeout``). ``_head_link`` serves it on the head and is
each supervisor's side of it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._sweep_phase import Phase

VERSION = 1
MAX_DATAGRAM = 8192  # a report is a few hundred bytes; anything larger is refused unread
AGGREGATE_EVERY_S = 2.0  # how often the head rewrites the aggregate file
SCAN_EVERY_S = 1.0  # how often the silence scan (every node) runs: not once per datagram
# A node that said it is stopping (capture, SIGTERM, grace, SIGKILL, cleanup) reports again only
# when that is over: its silence is judged against the stop's own bound instead.
STOPPING_STATES = ("diagnosing", "terminating", "killing", "cleaning")
REFUSALS = ("oversized", "not_json", "other_run", "unknown_node", "unauthenticated", "replay")


class Refused(Exception):
    """A datagram the aggregator (or a worker) does not accept; ``kind`` is one of REFUSALS."""

    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


def _canonical(run_id, node, seq, body):
    return json.dumps([run_id, node, seq, body], sort_keys=True, separators=(",", ":")).encode()


def seal(secret, run_id, node, seq, body):
    """The datagram carrying ``body`` from ``node`` as message ``seq`` of run ``run_id``."""
    mac = hmac.new(secret, _canonical(run_id, node, seq, body), hashlib.sha256).hexdigest()
    return json.dumps({"v": VERSION, "run": run_id, "node": node, "seq": seq, "body": body, "mac": mac}).encode()


def open_sealed(secret, run_id, data):
    """``(node, seq, body)`` of an authentic datagram of run ``run_id``; raises Refused."""
    if len(data) > MAX_DATAGRAM:
        raise Refused("oversized")
    try:
        message = json.loads(data)
    except ValueError:
        raise Refused("not_json") from None
    if not isinstance(message, dict) or message.get("v") != VERSION:
        raise Refused("not_json")
    node, seq, body, mac = message.get("node"), message.get("seq"), message.get("body"), message.get("mac")
    if message.get("run") != run_id:
        raise Refused("other_run")
    if not isinstance(node, str) or not isinstance(seq, int) or not isinstance(body, dict) or not isinstance(mac, str):
        raise Refused("not_json")
    want = hmac.new(secret, _canonical(run_id, node, seq, body), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, mac):
        raise Refused("unauthenticated")
    return node, seq, body


# The name a stop asked for from the controller carries in place of a node's.
CONTROLLER = "controller"


def stop_request_path(aggregate_path):
    """Where the controller asks the head to stop a run: beside the head's aggregate of that run
    (``aggregates/<run_id>.stop``); the file holds one line, the reason."""
    base = aggregate_path[:-5] if aggregate_path.endswith(".json") else aggregate_path
    return base + ".stop"


def watched_path(aggregate_path):
    """The mark the controller's watch leaves at each poll (``aggregates/<run_id>.watched``)."""
    base = aggregate_path[:-5] if aggregate_path.endswith(".json") else aggregate_path
    return base + ".watched"


class Orphan:
    """Whether no controller has watched the run for ``grace_s`` (0: never asked): the age of the
    watch's mark, or, before the first poll left one, of this object (the launch). Wall clock: the
    mark's time is the head's own."""

    def __init__(self, path, grace_s, wall=time.time):
        self.path, self.grace_s, self.wall = path, float(grace_s or 0), wall
        self.since = wall()

    def reason(self):
        """Why the run must stop, or None."""
        if self.grace_s <= 0:
            return None
        try:
            last = max(os.stat(self.path).st_mtime, self.since)
        except OSError:
            last = self.since
        age = self.wall() - last
        if age < self.grace_s:
            return None
        return f"no controller has watched the run for {age:.0f} s (aorta_orphan_grace_seconds {self.grace_s:g})"


def read_stop_request(path):
    """The reason in the controller's stop request, or None when there is none."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            reason = handle.read(600).strip()
    except OSError:
        return None
    return reason or "stopped from the controller"


class Aggregator:
    """What the head knows of every node, and whether the run must stop (no sockets, no threads).

    ``nodes``: every node's name, the head first. A node's report body holds ``state`` (the
    supervisor's), ``finished``, ``outcome``, ``rc``, ``reason``, ``progress`` and ``disk_free``.
    """

    def __init__(self, run_id, secret, nodes, heartbeat_timeout, join_timeout, now, stopping_timeout=None, sweep=None):
        self.run_id, self.secret = run_id, secret
        self.nodes = list(nodes)
        self.head = self.nodes[0]
        self.heartbeat_timeout = float(heartbeat_timeout)
        self.join_timeout = max(float(join_timeout), self.heartbeat_timeout)
        self.stopping_timeout = max(float(stopping_timeout or 0), self.heartbeat_timeout)
        self.started = now
        self.seen = {}  # node -> {"at": monotonic, "body": last body, "seq": last accepted seq}
        self.refused = dict.fromkeys(REFUSALS, 0)
        self.stop = None  # {"node", "kind", "reason", "after_s"} once decided; never undone
        self.silent = {}  # node -> why it counts as gone (its reports stopped or never came)
        self.scanned = None  # when the silence scan last ran
        self.joined = 0  # how many nodes have reported at least once (go when all have)
        self.pushed = set()  # what was sent to every worker unasked (pushes()): "plan", "end"
        # The fabric sweep between the join and the go (_sweep_phase.Phase), None when it is off:
        # ``sweep`` holds its seconds, threshold and min_gbps.
        self.sweep = Phase(self.nodes, **sweep) if sweep else None

    def receive(self, data, now, peer=None):
        """Handle one datagram: the reply datagram to send back, or None (refused, and counted).
        ``peer``: where it came from, where pushes() sends this node's answer."""
        try:
            node, seq, body = open_sealed(self.secret, self.run_id, data)
            if node not in self.nodes:
                raise Refused("unknown_node")
            if seq <= self.seen.get(node, {}).get("seq", 0):
                raise Refused("replay")
        except Refused as refused:
            self.refused[refused.kind] += 1
            return None
        reply = self.report(node, body, now, seq)
        if peer is not None:
            self.seen[node]["peer"] = peer
        return seal(self.secret, self.run_id, self.head, seq, reply)

    def pushes(self, now):
        """What the head sends every worker unasked, once each: when the last node joins and the
        sweep's plan is set (``plan``: each node's part of it), and when the join ends (``end``:
        the go, or a stop before it). ``(peer, datagram)`` for every worker heard from: the answer
        to its last report, sealed with that report's number. A worker pausing between two join
        reports takes it at once rather than at its next report (up to JOIN_POLL_S later); a lost
        one costs that wait, nothing else: the next report gets the same answer."""
        if "end" in self.pushed:
            return []
        ended = self.stop is not None or self._go(now)
        planned = self.sweep is not None and self.sweep.start is not None
        due = "end" if ended else ("plan" if planned and "plan" not in self.pushed else None)
        if due is None:
            return []
        self.pushed.add(due)
        return [
            (entry["peer"], seal(self.secret, self.run_id, self.head, entry["seq"], self._pushed(node, now, due)))
            for node, entry in self.seen.items()
            if node != self.head and entry.get("peer") is not None
        ]

    def _pushed(self, node, now, kind):
        """The answer pushed to ``node``, marked with its kind: a worker takes each kind once."""
        return dict(self.answer(node, now, True), push=kind)

    def report(self, node, body, now, seq=None):
        """Record ``node``'s ``body`` (authenticated already); the answer: stop or carry on."""
        entry = self.seen.setdefault(node, {"seq": 0})
        if "at" not in entry:
            self.joined += 1
        entry.update(at=now, body={k: v for k, v in body.items() if not k.startswith("sweep_")})
        if seq is not None:
            entry["seq"] = seq
        if self.sweep is not None:
            self.sweep.offer(node, body)
        if self.stop is None and body.get("finished") and body.get("outcome") != "ok":
            reason = f"{node} {body.get('outcome') or 'failed'}: {body.get('reason') or 'no reason given'}"
            self._decide(node, "failed", reason, now)
        self.tick(now)
        return self.answer(node, now, joining=body.get("state") == "joining")

    def swept(self, now):
        """Whether the fabric sweep is over (or off); once judged, a node below aorta_fabric_min_gbps
        stops the run before any rank starts."""
        if self.sweep is None:
            return True
        if self.sweep.result is not None:
            return True
        if not self.sweep.advance(self.joined >= len(self.nodes), now):
            return False
        below = self.sweep.below_minimum()
        if below and self.stop is None:
            self._decide(below[0], "fabric", below[1], now)
        return True

    def _go(self, now):
        """Every node has joined and the fabric sweep is over (or off; ``now`` None: not asked)."""
        return self.joined >= len(self.nodes) and (now is None or self.swept(now))

    def answer(self, node=None, now=None, joining=False):
        """Stop (with the node and why) or carry on; ``go`` once every node has joined and the
        fabric sweep is over; to a node still joining, its part of the sweep, then its figures
        judged (not to the reports of the run after it: they stay a few hundred bytes)."""
        go = self._go(now)
        answer = {"stop": self.stop is not None, "go": go, **(self.stop or {})}
        if self.sweep is not None and joining and node is not None and now is not None:
            plan = self.sweep.instructions(node, now)
            if plan:
                answer["sweep"] = plan
            verdict = self.sweep.node_result(node)
            if verdict:
                answer["sweep_result"] = verdict
        return answer

    def tick(self, now):
        """Name every node whose reports stopped (or never came) once its bound has passed, in
        ``silent``, even after a stop (a dead node often shows first as its peers' failures); the
        first one found stops the run unless something already did. The scan is O(nodes): at 1000
        nodes reporting every 3 s it runs once a second, not once per datagram."""
        if self.scanned is not None and now - self.scanned < SCAN_EVERY_S:
            return self.stop
        self.scanned = now
        for node in self.nodes:
            entry = self.seen.get(node)
            if node in self.silent or (entry is not None and entry.get("body", {}).get("finished")):
                continue
            if entry is None or "at" not in entry:
                if now - self.started >= self.join_timeout:
                    self.silent[node] = f"{node} never reported to the head in {self.join_timeout:.0f} s"
            elif now - entry["at"] >= self._bound(entry):
                self.silent[node] = f"no heartbeat from {node} for {now - entry['at']:.0f} s"
            if node in self.silent and self.stop is None:
                self._decide(node, "silent", self.silent[node], now)
        return self.stop

    def _bound(self, entry):
        stopping = entry.get("body", {}).get("state") in STOPPING_STATES
        return self.stopping_timeout if stopping else self.heartbeat_timeout

    def request_stop(self, reason, now):
        """The controller's stop (the user interrupted the run there, or ran the stop playbook):
        every node stops the usual way, this reason in its status; a stop already decided stays."""
        if self.stop is None:
            self._decide(CONTROLLER, "stopped", reason, now)
        return self.stop

    def _decide(self, node, kind, reason, now):
        """``kind``: ``failed`` (the node said so), ``silent`` (its reports stopped or never came),
        ``fabric`` (the sweep found it below aorta_fabric_min_gbps, before any rank started) or
        ``stopped`` (the controller asked: ``node`` is then CONTROLLER)."""
        self.stop = {"node": node, "kind": kind, "reason": reason, "after_s": round(now - self.started, 3)}
        return self.stop

    def settled(self):
        """Every node has reported its end or is gone silent; after a stop, a node never heard from
        is not waited for either (it cannot have launched)."""
        for node in self.nodes:
            entry = self.seen.get(node) or {}
            if node in self.silent or entry.get("body", {}).get("finished"):
                continue
            if self.stop is not None and "at" not in entry:
                continue
            return False
        return True

    def aggregate(self, now):
        """The whole run as the controller reads it (no secret)."""
        nodes = {}
        for node in self.nodes:
            entry = self.seen.get(node) or {}
            body = entry.get("body") or {}
            nodes[node] = {
                "seen": "at" in entry,
                "silent_s": round(now - entry["at"], 3) if "at" in entry else None,
                "state": body.get("state"),
                "finished": bool(body.get("finished")),
                "outcome": body.get("outcome"),
                "rc": body.get("rc"),
                "reason": body.get("reason"),
                "progress": body.get("progress") or {},
                "disk_free": body.get("disk_free"),
            }
        return {
            "run_id": self.run_id,
            "head": self.head,
            "nodes": nodes,
            "stop": self.stop,
            "silent": dict(self.silent),
            "settled": self.settled(),
            "refused": dict(self.refused),
            "elapsed_s": round(now - self.started, 3),
        }
