# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fabric sweep's phase between every node's join and the head's go (target side, standard
library only; no sockets: the clock is passed in).

Private to this collection. Runs on the node's Python (>= 3.9 syntax).

Why in the join: the world is complete (every node reported to the head) and no rank has started,
so the links are idle and a node the sweep finds too slow can still be kept out of the run without
a rank waiting for it. No task, no SSH command: the plan travels in the head's answers to the
reports the nodes send anyway, the figures in their next reports.

``Phase`` is the head's side (inside the aggregator): every node's join report brings its sweep
endpoint (fabric address, a TCP port it reserved and does not listen on yet, the tool it can run);
once every node has joined, the head sets the start ``LEAD_S`` ahead and sends each node its part
of ``_sweep.plan`` at once, its partners' endpoints included (``Aggregator.pushes``; a node whose
datagram was lost learns it at its next report, up to ``_head_link.JOIN_POLL_S`` later, and
measures what is left of round 0); each node measures, and its next report
carries its figures; once every node has reported them, or the sweep's bound has passed, the head
judges them (``_sweep.localise``) and says go. ``Participant`` is each node's side (the head's
too).
"""

from __future__ import annotations

import threading

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _sweep

LEAD_S = 0.3  # from every node joined to the sweep's first round: the pushed plan's trip, a thread's start
REPORT_S = 3.0  # after the last round, how long the head waits for the nodes' figures
FINISH_WAIT_S = 2.0  # at the go, the longest a node waits for its own measurement's thread
LISTED_SLOW = 50  # slow nodes listed by name in the cluster summary (more: a fabric-wide problem)
LISTED = 20  # nodes listed by name in the cluster summary's unresolved and not measured lists


def bound_s(seconds):
    """The longest the sweep adds to the join: the lead, its rounds, and its figures' reports."""
    return LEAD_S + float(seconds) + REPORT_S if seconds and float(seconds) > 0 else 0.0


class Phase:
    """The head's side of the sweep: the plan per node, the figures, the judgement."""

    def __init__(self, nodes, seconds, threshold=_sweep.DEFAULT_THRESHOLD, min_gbps=0.0):
        self.nodes = list(nodes)
        self.rank = {node: i for i, node in enumerate(self.nodes)}
        self.seconds = float(seconds)
        self.threshold = float(threshold)
        self.min_gbps = float(min_gbps or 0)
        self.shifts = _sweep.shifts(len(self.nodes))
        self.rounds = len(self.shifts)
        self.round_s = self.seconds / self.rounds if self.rounds else 0.0
        self.endpoints = {}  # node -> {"address", "port", "tool"} or {"error"}
        self.figures = {}  # node -> [{"round", "send_to", "send_gbps", "recv_from", "recv_gbps"}]
        self.start = None  # the head's monotonic time of round 0
        self.chosen = None  # the tool every pair runs, fixed at the start
        self.result = None  # _sweep.localise's answer, once judged

    def offer(self, node, body):
        """What a node's report says of the sweep: its endpoint, or its figures."""
        if node not in self.rank:
            return
        endpoint = body.get("sweep_endpoint")
        if isinstance(endpoint, dict) and node not in self.endpoints:
            self.endpoints[node] = dict(endpoint)
        figures = body.get("sweep_figures")
        if isinstance(figures, list) and node not in self.figures:
            self.figures[node] = [f for f in figures if isinstance(f, dict)]

    def tool(self):
        """The tool every pair runs: perftest only where every node can run it, TCP otherwise (fixed
        at the start: every answer carries it)."""
        if self.chosen is not None:
            return self.chosen
        tools = {str((e or {}).get("tool") or "tcp") for e in self.endpoints.values()}
        return "perftest" if tools == {"perftest"} and len(self.endpoints) == len(self.nodes) else "tcp"

    def advance(self, joined_all, now):
        """Start once every node joined; judge once the figures are in or the bound has passed.
        Returns True once judged (the head may say go)."""
        if self.result is not None:
            return True
        if not joined_all:
            return False
        if self.start is None:
            self.start = now + LEAD_S
            self.chosen = self.tool()
        every = len(self.figures) >= len(self.nodes)
        if every or now >= self.start + self.seconds + REPORT_S or self.rounds == 0:
            self.result = self._judge()
        return self.result is not None

    def instructions(self, node, now):
        """The node's part while the sweep is on: its rank, the tool, when round 0 starts (seconds
        from now on the node's own clock) and each round's partners with their endpoints."""
        if self.start is None or self.result is not None or node not in self.rank:
            return None
        rank, n = self.rank[node], len(self.nodes)
        plan = []
        for step in _sweep.plan(n, rank):
            partner = self.endpoints.get(self.nodes[step["send_to"]]) or {}
            plan.append(
                {
                    "round": step["round"],
                    "send_to": step["send_to"],
                    "send_address": partner.get("address"),
                    "send_port": partner.get("port"),
                    "recv_from": step["recv_from"],
                }
            )
        return {
            "rank": rank,
            "tool": self.tool(),
            "start_in": round(self.start - now, 3),
            "round_s": self.round_s,
            "plan": plan,
        }

    def _measurements(self):
        """Per round, every pair with the sender's and the receiver's own figures."""
        n = len(self.nodes)
        rounds = _sweep.rounds(n)
        figure = {}  # (round, rank, direction) -> gbps
        for node, rows in self.figures.items():
            for row in rows:
                r = row.get("round")
                figure[(r, self.rank[node], "send")] = row.get("send_gbps")
                figure[(r, self.rank[node], "recv")] = row.get("recv_gbps")
        return [
            [
                {
                    "sender": i,
                    "receiver": j,
                    "send_gbps": figure.get((r, i, "send")),
                    "recv_gbps": figure.get((r, j, "recv")),
                }
                for i, j in pairs
            ]
            for r, pairs in enumerate(rounds)
        ]

    def _judge(self):
        try:
            return _sweep.localise(self._measurements(), self.threshold, nodes=len(self.nodes))
        except ValueError as exc:  # figures the judgement cannot read: the go must still come
            found = _sweep.localise([], self.threshold, nodes=len(self.nodes))
            return dict(found, localisable=False, reason=f"figures not judged: {exc}")

    def below_minimum(self):
        """(node, reason) of the first node, in rank order, whose best figure in a direction is below
        aorta_fabric_min_gbps; None when none is, or no minimum is set, or the figures cannot say which
        end of a pair is slow (two nodes: the healthy one would be named as often as the slow one)."""
        if not self.min_gbps or self.result is None or not self.result["localisable"]:
            return None
        for rank, node in enumerate(self.nodes):
            entry = self.result["nodes"].get(str(rank)) or {}
            for direction, verb in (("send", "sends"), ("recv", "receives")):
                gbps = entry.get(direction + "_gbps")
                if gbps is not None and gbps < self.min_gbps:
                    return node, (
                        f"fabric sweep: {node} {verb} at {gbps:g} Gbit/s at best, below aorta_fabric_min_gbps "
                        f"{self.min_gbps:g} (cluster median {self.result['median_gbps']} Gbit/s)"
                    )
        return None

    def node_result(self, node):
        """What the head tells a node of its own figures once judged (a few hundred bytes)."""
        if self.result is None or node not in self.rank:
            return None
        rank = self.rank[node]
        entry = self.result["nodes"].get(str(rank)) or {}
        return {
            "send_gbps": entry.get("send_gbps"),
            "recv_gbps": entry.get("recv_gbps"),
            "send_ratio": entry.get("send_ratio"),
            "recv_ratio": entry.get("recv_ratio"),
            "ratio": entry.get("ratio"),
            "median_gbps": self.result["median_gbps"],
            "slow": any(item["rank"] == rank for item in self.result["slow"]),
        }

    def summary(self):
        """The cluster's sweep for run.json (bounded whatever the node count: the named slow nodes,
        at most ``LISTED`` unresolved and not measured ones by name, and counts)."""
        if self.result is None:
            return None
        result = self.result
        named = [dict(item, node=self.nodes[item["rank"]]) for item in result["slow"][:LISTED_SLOW]]
        unresolved = [dict(item, node=self.nodes[item["rank"]]) for item in result["unresolved"]]
        return {
            "tool": self.tool(),
            "seconds": self.seconds,
            "threshold": self.threshold,
            "min_gbps": self.min_gbps or None,
            "median_gbps": result["median_gbps"],
            "localisable": result["localisable"],
            "reason": result["reason"],
            "rounds": [dict(row, shift=shift) for row, shift in zip(result["rounds"], self.shifts)],
            "slow": named,
            "slow_count": len(result["slow"]),
            "unresolved": unresolved[:LISTED],
            "unresolved_count": len(unresolved),
            "not_measured": [self.nodes[rank] for rank in result["not_measured"][:LISTED]],
            "not_measured_count": len(result["not_measured"]),
        }


class Participant:
    """A node's side of the sweep: its endpoint in the join reports, the measurement in a thread
    once the head's plan comes, its figures in the next reports, and the head's verdict on them.

    ``endpoint``: a ``_sweep_net.SweepEndpoint`` (None when it could not be made: ``error`` says
    why, and the node takes part as not measured); ``tool``/``why``: what this node can run."""

    def __init__(self, endpoint, tool="tcp", why="", error=None, clock=None):
        self.endpoint, self.tool, self.why, self.error = endpoint, tool, why, error
        self.clock = clock
        self.thread = None
        self.figures = None
        self.figures_sent = False  # whether a join report carried them (fields())
        self.instructions = None
        self.verdict = None
        self.began = self.ended = None  # this node's clock: the plan's arrival, the verdict's

    def fields(self):
        """What this node's join report carries of the sweep."""
        if self.figures is not None:
            self.figures_sent = True
            return {"sweep_figures": self.figures}
        if self.endpoint is None:
            return {"sweep_endpoint": {"error": self.error or "no endpoint"}}
        return {"sweep_endpoint": {"address": self.endpoint.address, "port": self.endpoint.port, "tool": self.tool}}

    def figures_due(self):
        """Its figures are ready and no report carried them yet: the join reports them at once."""
        return self.figures is not None and not self.figures_sent

    def follow(self, answer):
        """Act on the head's answer: start the measurement once its plan comes; keep its verdict."""
        if not answer:
            return
        if answer.get("sweep_result") is not None and self.verdict is None:
            self.verdict = answer["sweep_result"]
            self.ended = self.clock() if self.clock else None
        plan = answer.get("sweep")
        if plan and self.thread is None and not answer.get("stop"):
            self.instructions = plan
            self.began = self.clock() if self.clock else None
            if self.endpoint is None:
                self.figures = []
                return
            self.endpoint.rank = plan["rank"]
            start_at = self.clock() + float(plan["start_in"])
            self.thread = threading.Thread(
                target=self._measure, args=(plan["plan"], start_at, float(plan["round_s"])), daemon=True
            )
            self.thread.start()

    def _measure(self, plan, start_at, round_s):
        try:
            tool = (self.instructions or {}).get("tool")
            run = self.endpoint.run_perftest if tool == "perftest" else self.endpoint.run
            self.figures = run(plan, start_at, round_s)
        except Exception as exc:  # the sweep informs; a fault in it never stops the join
            self.error = f"sweep failed: {exc}"
            self.figures = []

    def record(self):
        """The node's sweep for its status (run.json's ``nodes[].fabric_sweep``)."""
        if self.instructions is None and self.verdict is None:
            return None
        record = {"tool": (self.instructions or {}).get("tool"), "rounds": self.figures or []}
        if self.began is not None and self.ended is not None:
            record["took_s"] = round(self.ended - self.began, 3)  # the plan's arrival to the verdict
        if self.error:
            record["error"] = self.error
        record.update(self.verdict or {})
        return record

    def finish(self):
        """The sweep is over for this node (the head said go, or stop): its measurement ends by its
        last round's end, so the wait is short; then its port is closed."""
        if self.thread is not None:
            self.thread.join(FINISH_WAIT_S)
        self.close()

    def close(self):
        if self.endpoint is not None:
            self.endpoint.close()
