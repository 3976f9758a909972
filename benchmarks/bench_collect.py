"""Collection benchmark on the stand-in cluster: trace_collect vs a plain `rsync -a` of the raw trees.

Each node holds generated Kineto traces of realistic size (a real MI300X fixture's events
replicated; AORTA_BENCH_NODE_MB per node, default 400, at least 200), and its management link is
shaped to 1 Gbit/s with tc (containers otherwise talk at memory speed, where compression can
only lose). Measured in one run, over the same shaped links:
  wall_ratio   trace_collect.yml wall time / parallel `rsync -a` of the same trees (target <= 1.0)
  bytes_ratio  bytes the nodes sent for trace_collect / for rsync (target <= 1/8 = 0.125)
Each is timed AORTA_BENCH_COLLECT_ROUNDS times (default 3), alternated; the ratio is of the medians.
Last line: BENCH collect key=value ...
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _standin_bench import REPO, node_exec, playbook, ssh_argv, standin

FIXTURE = REPO / "tests" / "fixtures" / "traces" / "mi300" / "resnet-act-checkpoint.json.gz"
NODE_MB = max(200.0, float(os.environ.get("AORTA_BENCH_NODE_MB", "400")))
RANKS_PER_NODE = 2
RATE = "1gbit"
ROUNDS = max(1, int(os.environ.get("AORTA_BENCH_COLLECT_ROUNDS", "3")))


def trace_body(target_bytes: float) -> bytes:
    with gzip.open(FIXTURE) as handle:
        events = json.loads(handle.read())["traceEvents"]
    one = json.dumps(events)[1:-1].encode()
    copies = int(target_bytes / len(one)) + 1
    return b", ".join([one] * copies)


def tx_bytes(container: str) -> int:
    return int(node_exec(container, "cat", "/sys/class/net/eth0/statistics/tx_bytes"))


def where_the_time_went(task_log: Path, t0: float, end: float) -> dict[str, float]:
    """The playbook's wall time split at its tasks, from its task log: before the first node's
    node_end (ansible-playbook's start, the inventory, the controller's preparation), node_end on
    every node (first start to last end), combined_traces, and the rest (between tasks, the end);
    then, within node_end, the slowest node's teardown and collection (not added to the rest)."""
    rows = [json.loads(line) for line in task_log.read_text().splitlines() if line.strip()]

    def span(action: str) -> tuple[float, float]:
        mine = [r for r in rows if r["action"] == f"aorta.cluster.{action}" and r["start"]]
        return min(r["start"] for r in mine), max(r["end"] for r in mine)

    node_end, combined = span("node_end"), span("combined_traces")
    parts = {
        "before_node_end": node_end[0] - t0,
        "node_end": node_end[1] - node_end[0],
        "combined_traces": combined[1] - combined[0],
    }
    parts["rest"] = (end - t0) - sum(parts.values())
    # Inside node_end, the slowest node's parts (its result's seconds).
    ends = [r.get("seconds") or {} for r in rows if r["action"] == "aorta.cluster.node_end"]
    for part in ("teardown", "collect"):
        parts[f"node_end.{part}"] = max((float(e.get(part, 0)) for e in ends), default=0.0)
    return parts


def rsync_round(nodes: list, run_id: str, dest: Path) -> tuple[float, int]:
    """Both nodes' trees with plain `rsync -a`, side by side: (seconds, bytes the nodes sent)."""
    dest.mkdir()
    before = [tx_bytes(n["container"]) for n in nodes]
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                "rsync",
                "-a",
                "-e",
                " ".join(ssh_argv(n["mgmt_ip"])[:-1]),
                f"root@{n['mgmt_ip']}:/root/aorta/aorta_runs/{run_id}/",
                str(dest / f"node{i}/"),
            ]
        )
        for i, n in enumerate(nodes)
    ]
    for proc in procs:
        if proc.wait(timeout=900) != 0:
            raise RuntimeError("rsync baseline failed")
    seconds = time.monotonic() - t0
    sent = sum(tx_bytes(n["container"]) - b for n, b in zip(nodes, before))
    shutil.rmtree(dest)  # 845 MB a round
    return seconds, sent


def collect_round(nodes: list, run_id: str, results: Path) -> tuple[float, int, dict[str, float]]:
    """trace_collect.yml into ``results``: (seconds, bytes the nodes sent, where the time went)."""
    before = [tx_bytes(n["container"]) for n in nodes]
    extra = {
        "aorta_run_id": run_id,
        "aorta_results_dir": str(results),
        "aorta_collect_since": 0,
        "aorta_nproc_per_node": RANKS_PER_NODE,
    }
    task_log = results.with_suffix(".tasks.jsonl")
    wall_t0 = time.time()
    t0 = time.monotonic()
    proc = playbook(
        "playbooks/trace_collect.yml", standin.OUT / "cluster.json", "-e", json.dumps(extra), task_log=task_log
    )
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    sent = sum(tx_bytes(n["container"]) - b for n, b in zip(nodes, before))
    manifest = json.loads((results / "combined_traces" / "manifest.json").read_text())
    if manifest["missing_ranks"]:
        raise RuntimeError(f"collection missed ranks {manifest['missing_ranks']}")
    spent = where_the_time_went(task_log, wall_t0, wall_t0 + seconds)
    shutil.rmtree(results)
    return seconds, sent, spent


def main() -> int:
    state = standin.up(2)
    nodes = state["nodes"]
    run_id = f"bench-collect-{uuid.uuid4().hex[:6]}"
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-collect-") as tmp_name:
            tmp = Path(tmp_name)
            body = trace_body(NODE_MB * 1e6 / RANKS_PER_NODE)
            raw_total = 0
            for index, node in enumerate(nodes):
                for local in range(RANKS_PER_NODE):
                    rank = index * RANKS_PER_NODE + local
                    head = json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 4}})
                    path = tmp / f"rank{rank}.json"
                    path.write_bytes(head[:-1].encode() + b', "traceEvents": [' + body + b"]}")
                    raw_total += path.stat().st_size
                    target = f"/root/aorta/aorta_runs/{run_id}/torch_profiler/rank{rank}"
                    node_exec(node["container"], "mkdir", "-p", target)
                    subprocess.run(["docker", "cp", str(path), f"{node['container']}:{target}/trace.json"], check=True)
                    path.unlink()
                node_exec(
                    node["container"],
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    "eth0",
                    "root",
                    "tbf",
                    "rate",
                    RATE,
                    "burst",
                    "256kb",
                    "latency",
                    "50ms",
                )

            rsyncs, collects = [], []
            for round_no in range(ROUNDS):
                rsyncs.append(rsync_round(nodes, run_id, tmp / f"rsync{round_no}"))
                collects.append(collect_round(nodes, run_id, tmp / f"role{round_no}"))
    finally:
        standin.down()
    rsync_s = statistics.median(r[0] for r in rsyncs)
    role_s = statistics.median(c[0] for c in collects)
    rsync_bytes, role_bytes = rsyncs[0][1], collects[0][1]
    spent = {name: statistics.median(c[2][name] for c in collects) for name in collects[0][2]}
    print(f"{len(nodes)} nodes x {raw_total / len(nodes) / 1e6:.0f} MB raw, links shaped to {RATE}")
    print(
        f"{ROUNDS} alternated rounds: rsync -a "
        + " ".join(f"{r[0]:.1f}" for r in rsyncs)
        + f" s, {rsync_bytes / 1e6:.0f} MB sent; trace_collect "
        + " ".join(f"{c[0]:.1f}" for c in collects)
        + f" s, {role_bytes / 1e6:.1f} MB sent"
    )
    print("trace_collect, where the time went (medians): " + ", ".join(f"{k} {v:.1f}s" for k, v in spent.items()))
    print(
        f"BENCH collect wall_ratio={role_s / rsync_s:.2f} bytes_ratio={role_bytes / rsync_bytes:.3f} "
        f"node_mb={raw_total / len(nodes) / 1e6:.0f} rate={RATE} targets=wall<=1.0,bytes<=0.125"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
