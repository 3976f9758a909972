"""Collection benchmark on the stand-in cluster: trace_collect vs a plain `rsync -a` of the raw trees.

Each node holds generated Kineto traces of realistic size (a real MI300X fixture's events
replicated; AORTA_BENCH_NODE_MB per node, default 400, at least 200), and its management link is
shaped to 1 Gbit/s with tc (containers otherwise talk at memory speed, where compression can
only lose). Measured in one run, over the same shaped links:
  wall_ratio   trace_collect.yml wall time / parallel `rsync -a` of the same trees (target <= 1.0)
  bytes_ratio  bytes the nodes sent for trace_collect / for rsync (target <= 1/8 = 0.125)
Last line: BENCH collect key=value ...
"""

from __future__ import annotations

import gzip
import json
import os
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


def trace_body(target_bytes: float) -> bytes:
    with gzip.open(FIXTURE) as handle:
        events = json.loads(handle.read())["traceEvents"]
    one = json.dumps(events)[1:-1].encode()
    copies = int(target_bytes / len(one)) + 1
    return b", ".join([one] * copies)


def tx_bytes(container: str) -> int:
    return int(node_exec(container, "cat", "/sys/class/net/eth0/statistics/tx_bytes"))


def where_the_time_went(task_log: Path, t0: float, end: float) -> str:
    """The playbook's wall time split at its tasks, from its task log: before the first node's
    node_end (ansible-playbook's start, the inventory, the controller's preparation), node_end on
    every node (first start to last end), combined_traces, and the rest (between tasks, the end)."""
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
    return ", ".join(f"{name} {value:.1f}s" for name, value in parts.items())


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
                        str(tmp / f"rsync{i}/"),
                    ]
                )
                for i, n in enumerate(nodes)
            ]
            for proc in procs:
                if proc.wait(timeout=900) != 0:
                    raise RuntimeError("rsync baseline failed")
            rsync_s = time.monotonic() - t0
            rsync_bytes = sum(tx_bytes(n["container"]) - b for n, b in zip(nodes, before))

            before = [tx_bytes(n["container"]) for n in nodes]
            t0 = time.monotonic()
            extra = {
                "aorta_run_id": run_id,
                "aorta_results_dir": str(tmp / "role"),
                "aorta_collect_since": 0,
                "aorta_nproc_per_node": RANKS_PER_NODE,
            }
            task_log = tmp / "tasks.jsonl"
            wall_t0 = time.time()
            proc = playbook(
                "playbooks/trace_collect.yml", standin.OUT / "cluster.json", "-e", json.dumps(extra), task_log=task_log
            )
            role_s = time.monotonic() - t0
            spent = where_the_time_went(task_log, wall_t0, wall_t0 + role_s)
            role_bytes = sum(tx_bytes(n["container"]) - b for n, b in zip(nodes, before))
            if proc.returncode != 0:
                raise RuntimeError(proc.stdout[-3000:])
            manifest = json.loads((tmp / "role" / "combined_traces" / "manifest.json").read_text())
            if manifest["missing_ranks"]:
                raise RuntimeError(f"collection missed ranks {manifest['missing_ranks']}")
    finally:
        standin.down()
    print(f"{len(nodes)} nodes x {raw_total / len(nodes) / 1e6:.0f} MB raw, links shaped to {RATE}")
    print(
        f"rsync -a: {rsync_s:.1f}s, {rsync_bytes / 1e6:.0f} MB sent; trace_collect: {role_s:.1f}s, "
        f"{role_bytes / 1e6:.1f} MB sent"
    )
    print(f"trace_collect, where the time went: {spent}")
    print(
        f"BENCH collect wall_ratio={role_s / rsync_s:.2f} bytes_ratio={role_bytes / rsync_bytes:.3f} "
        f"node_mb={raw_total / len(nodes) / 1e6:.0f} rate={RATE} targets=wall<=1.0,bytes<=0.125"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
