"""Fabric sweep benchmark: what the sweep costs the head's aggregator at 1000 nodes.

The head answers every node's join report (every 0.5 s while the sweep is on); with the sweep its
answer carries the node's plan, and once the figures are in it judges them. Measured in one run, in
the controller's Python (the aggregator is the node's code, run here without sockets: the sealing
and opening of the datagrams, the report, the answer):
  answer_us        one join report of one node answered by the aggregator during the sweep (median)
  baseline_us      the same report answered by an aggregator without a sweep (measured here)
  answer_ratio     answer_us / baseline_us
  head_cpu_share   answer_us x NODES / JOIN_POLL_S: the share of one core the head's thread spends
                   answering every node twice a second (target < 0.5)
  judge_s          the judgement of every node's figures once they are in (target < 1 s)
  answer_bytes     the largest sealed answer with a plan (target < 8192, the datagram limit)
Last line: BENCH sweep key=value ...
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _aggregator, _head_link, _sweep  # noqa: E402

NODES = 1000
SECRET = bytes(range(32))
REPEATS = 3000


def joined(aggregator, names):
    for index, node in enumerate(names):
        body = {
            "state": "joining",
            "finished": False,
            "sweep_endpoint": {"address": f"fd00:0:0:{index // 250}::{index % 250 + 1}", "port": 40000, "tool": "tcp"},
        }
        aggregator.report(node, body, 0.0)


def answer_us(aggregator, names, now):
    """The median time of one node's join report, sealed, opened and answered, over REPEATS."""
    times = []
    rng = random.Random(1)
    largest = 0
    for seq in range(REPEATS):
        node = names[rng.randrange(len(names))]
        data = _aggregator.seal(SECRET, "run1", node, 10 + seq, {"state": "joining", "finished": False})
        started = time.perf_counter()
        reply = aggregator.receive(data, now)
        times.append(time.perf_counter() - started)
        largest = max(largest, len(reply or b""))
    return statistics.median(times) * 1e6, largest


def main() -> int:
    names = [f"gpu-node-{i:04d}.cluster.example" for i in range(NODES)]
    plain = _aggregator.Aggregator("run1", SECRET, names, 30, 120, 0.0)
    joined(plain, names)
    baseline, _size = answer_us(plain, names, 0.5)
    sweeping = _aggregator.Aggregator(
        "run1", SECRET, names, 30, 120, 0.0, sweep={"seconds": 10.0, "threshold": 0.5, "min_gbps": 0}
    )
    joined(sweeping, names)
    during, largest = answer_us(sweeping, names, 0.5)
    rng = random.Random(2)
    for rank, node in enumerate(names):
        rows = [
            dict(step, send_gbps=rng.uniform(180, 200), recv_gbps=rng.uniform(180, 200))
            for step in _sweep.plan(NODES, rank)
        ]
        sweeping.sweep.offer(node, {"sweep_figures": rows})
    started = time.perf_counter()
    sweeping.sweep.advance(True, 1.0)
    judge_s = time.perf_counter() - started
    share = during * 1e-6 * NODES / _head_link.JOIN_POLL_S
    named = len(sweeping.sweep.summary()["slow"])
    print(
        f"{NODES} nodes: a join report answered in {during:.0f} us during the sweep, {baseline:.0f} us without; "
        f"{share:.2f} of a core at one report per node every {_head_link.JOIN_POLL_S} s; judgement {judge_s:.3f} s "
        f"({named} named of healthy figures); largest answer {largest} bytes; "
        f"summary {len(json.dumps(sweeping.sweep.summary()))} bytes"
    )
    print(
        f"BENCH sweep nodes={NODES} answer_us={during:.0f} baseline_us={baseline:.0f} "
        f"answer_ratio={during / baseline:.2f} head_cpu_share={share:.2f} judge_s={judge_s:.3f} "
        f"answer_bytes={largest} targets=head_cpu_share<0.5,judge_s<1,answer_bytes<8192"
    )
    return 0 if share < 0.5 and judge_s < 1 and largest < 8192 else 1


if __name__ == "__main__":
    sys.exit(main())
