"""Launch benchmark on the stand-in cluster: wall time from start to "all ranks started".

Medians of alternated rounds (AORTA_BENCH_LAUNCH_ROUNDS, default 3) after one run on fresh nodes,
on Docker-in-Docker nodes reached over SSH:
  n1_s, n3_s        aorta_multinode.yml on 1 and on 3 nodes (target: n3/n1 no worse than the loop's own)
  shell_n3_s        a plain `ssh node docker run ... && docker exec ... torchrun &` loop doing the same
                    launch on 3 nodes (the baseline a user would write by hand)
  shell_ratio_n3_n1 that loop on 3 nodes / on 1: what three nodes on this machine's cores cost anyway
"All ranks started" is the latest "Initialised distributed training" line over every rank's log.
Before the last line, the 3-node runs' time split by their task logs (see phases()); cold_n3_s is
the first run, which also copies py-spy to every node; sweep_s is the 3-node runs' fabric sweep on
the head (the stand-in's 1 s sweep: its plan's arrival to its verdict, the median).
Last line: BENCH launch key=value ...
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _standin_bench import node_exec, playbook, ssh_argv, standin, subset

# Medians over this many alternated rounds: one sample each moved the ratios by 0.2 between runs.
ROUNDS = max(1, int(os.environ.get("AORTA_BENCH_LAUNCH_ROUNDS", "3")))
OVERRIDES = {"training.max_steps": 2, "profiling.active": 1, "profiling.wait": 0, "profiling.warmup": 0}


def started_at(log_text: str) -> float:
    for line in log_text.splitlines():
        if "Initialised distributed training" in line:
            stamp = line.split(" | ")[0]
            return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.timezone.utc).timestamp()
    raise RuntimeError("no start line in a rank log")


def ranks_started(containers: list[str], output_dir: str) -> float:
    latest = 0.0
    for container in containers:
        for log in node_exec(container, "sh", "-c", f"ls /root/aorta/{output_dir}/rank*.log").split():
            latest = max(latest, started_at(node_exec(container, "cat", log)))
    return latest


def phases(task_log: Path, t0: float, started: float) -> dict[str, float]:
    """Where a playbook run's time went until all ranks started, from its task log: the controller
    until the first node's probe starts (ansible-playbook's own start, the inventory, the controller's
    preparation), the probe on every node, the launch task on every node, then the ranks' own start."""
    rows = [json.loads(line) for line in task_log.read_text().splitlines()]

    def span(action: str) -> tuple[float, float]:
        mine = [r for r in rows if r["action"] == f"aorta.cluster.{action}" and r["start"]]
        return min(r["start"] for r in mine), max(r["end"] for r in mine)

    probe, launch = span("node_prepare"), span("node_launch")
    return {
        "before_probe": probe[0] - t0,
        "probe": probe[1] - probe[0],
        "between": launch[0] - probe[1],
        "launch": launch[1] - launch[0],
        "ranks": started - launch[1],
    }


def run_playbook(nodes: int, tmp: Path, state: dict) -> tuple[float, dict[str, float]]:
    run_id = f"bench-{nodes}-{uuid.uuid4().hex[:6]}"
    task_log = tmp / f"{run_id}.tasks"
    extra = {
        "aorta_run_id": run_id,
        "aorta_results_dir": str(tmp / run_id),
        "aorta_nproc_per_node": 1,
        "aorta_training_overrides": OVERRIDES,
        "aorta_collect_traces": False,
        "aorta_master_launch_mode": "torchrun",
    }
    t0 = time.time()
    proc = playbook(
        "aorta_multinode.yml", subset(nodes, tmp / f"{run_id}.json"), "-e", json.dumps(extra), task_log=task_log
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    containers = [n["container"] for n in state["nodes"][:nodes]]
    started = ranks_started(containers, f"aorta_runs/{run_id}")
    parts = phases(task_log, t0, started)
    parts["sweep"] = sweep_seconds(containers[0], run_id)
    return started - t0, parts


def sweep_seconds(head: str, run_id: str) -> float:
    """The fabric sweep on the head, from its plan's arrival to its verdict (its supervisor's
    status: fabric_sweep.took_s); 0 where no sweep ran (one node)."""
    status = json.loads(node_exec(head, "cat", f"/var/tmp/aorta-cluster/runs/{run_id}.json"))
    return float((status.get("fabric_sweep") or {}).get("took_s") or 0.0)


def run_shell(nodes: int, state: dict) -> float:
    run_id = f"bench-shell-{uuid.uuid4().hex[:6]}"
    head = state["nodes"][0]["vpc_ip"]
    procs = []
    t0 = time.time()
    for rank, node in enumerate(state["nodes"][:nodes]):
        remote = (
            f"docker run -d --name {run_id} --network host --ipc host -v /root/aorta:/mnt -w /mnt "
            f"{state['WORKLOAD_IMAGE']} sleep 600 >/dev/null && "
            f"docker exec -e GLOO_SOCKET_IFNAME={node['fabric_if']} {run_id} torchrun --nnodes={nodes} "
            f"--node_rank={rank} --nproc_per_node=1 --master_addr={head} --master_port=29777 train.py "
            f"--config config/standin.yaml --override training.output_dir=aorta_runs/{run_id} "
            + " ".join(f"{k}={v}" for k, v in OVERRIDES.items())
        )
        procs.append(
            subprocess.Popen([*ssh_argv(node["mgmt_ip"]), remote], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    for proc in procs:
        proc.wait(timeout=600)
    containers = [n["container"] for n in state["nodes"][:nodes]]
    try:
        return ranks_started(containers, f"aorta_runs/{run_id}") - t0
    finally:
        for container in containers:
            subprocess.run(
                ["docker", "exec", container, "docker", "rm", "-f", run_id], capture_output=True, check=False
            )


def main() -> int:
    state = standin.up(3)
    samples: dict[str, list[float]] = {"n1": [], "n3": [], "shell_n1": [], "shell_n3": []}
    splits: dict[str, list[dict[str, float]]] = {"n1": [], "n3": []}
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-launch-") as tmp:
            # The first run on fresh nodes also copies py-spy to each (once per node, as a user's
            # first run does): timed, but apart, so that the rounds compare like with like.
            cold = run_playbook(3, Path(tmp), state)[0]
            # Alternated, so that a slow minute of this shared machine falls on all of them.
            for _round in range(ROUNDS):
                for nodes in (1, 3):
                    took, parts = run_playbook(nodes, Path(tmp), state)
                    samples[f"n{nodes}"].append(took)
                    splits[f"n{nodes}"].append(parts)
                    samples[f"shell_n{nodes}"].append(run_shell(nodes, state))
    finally:
        standin.down()
    mid = {name: statistics.median(values) for name, values in samples.items()}
    shown = {name: " ".join(f"{v:.1f}" for v in values) for name, values in samples.items()}
    print(
        f"playbook start -> all ranks started, {ROUNDS} rounds: 1 node {shown['n1']} s; 3 nodes {shown['n3']} s "
        f"(first run on fresh nodes {cold:.1f} s); shell loop: 1 node {shown['shell_n1']} s, "
        f"3 nodes {shown['shell_n3']} s"
    )
    for name, rows in splits.items():
        print(
            f"{name[1:]} node(s), where the time went (medians): "
            + ", ".join(f"{part} {statistics.median(r[part] for r in rows):.1f}s" for part in rows[0])
        )
    # The loop's own 3-vs-1 ratio is what this machine adds by running three nodes on its two cores.
    sweep_s = statistics.median(r["sweep"] for r in splits["n3"])
    print(
        f"BENCH launch n1_s={mid['n1']:.1f} n3_s={mid['n3']:.1f} ratio_n3_n1={mid['n3'] / mid['n1']:.2f} "
        f"sweep_s={sweep_s:.2f} "
        f"shell_n3_s={mid['shell_n3']:.1f} ratio_vs_shell={mid['n3'] / mid['shell_n3']:.2f} "
        f"shell_ratio_n3_n1={mid['shell_n3'] / mid['shell_n1']:.2f} cold_n3_s={cold:.1f} rounds={ROUNDS} "
        "targets=ratio_vs_shell<=2.0,ratio_n3_n1<=shell_ratio_n3_n1"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
