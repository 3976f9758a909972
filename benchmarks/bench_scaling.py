"""What a scaling campaign costs against its runs: ansible-playbook aorta.cluster.scaling on 4
stand-in nodes (the opening run of every node, rungs 1, 2 and 4), against the sum of one stand-in
run per rung measured in the same process (aorta_multinode.yml on 4, 1, 2 and 4 nodes, one after the
other), with the straggler profile (50 ms of compute a step). A campaign runs every group of a rung
at once, so its ideal is the sum (ratio 1); the two shared cores stretch the runs that share them.

Also: how many groups' runs watched their heads at once during rung 1 (sampled from the
controller's processes every 0.2 s). Each of those runs polls its own head, one SSH command per
poll, so that count is the controller's SSH commands per poll at rung 1. The campaign head that
would hold it at one whatever the group count (issue 54, item 5) is not built: at 64 nodes it would
be min(64, aorta_scaling_parallel); the line says so rather than measuring a number the design
cannot give.

And the controller's memory per group run at rung 1 (the PSS of each group's ansible-playbook and its
forks, averaged over the groups alive, the most seen): what a group per ansible-playbook costs, and
why a rung of 1000 groups cannot all run at once that way.

Last line: BENCH scaling campaign_s=... runs_sum_s=... ratio=... rung1_runs_at_once=... group_run_mib=... nodes=4
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from _standin_bench import REPO, playbook, standin, subset

NODES = 4
PROFILE = {
    "training.max_steps": 8,
    "profiling.wait": 1,
    "profiling.warmup": 1,
    "profiling.active": 8,
    "standin.compute_ms": 50,
}
PARALLEL = 16  # aorta_scaling_parallel's default


def one_run(tmp: Path, nodes: int) -> float:
    inventory = subset(nodes, tmp / f"{nodes}-{uuid.uuid4().hex[:6]}-cluster.json")
    extra = {
        "aorta_results_dir": str(tmp / uuid.uuid4().hex[:8]),
        "aorta_training_overrides": PROFILE,
        "aorta_master_launch_mode": "torchrun",
    }
    started = time.monotonic()
    proc = playbook("aorta_multinode.yml", inventory, "-e", json.dumps(extra))
    took = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    return took


def pss_kb(pid: str) -> int:
    """A process's proportional set size (shared pages split between their users), in KiB; 0 once gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    found = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) if found else 0


def watched_at_once(stop: threading.Event, found: list[int], memory: list[float]) -> None:
    """The most rung-1 group runs alive at once (their ansible-playbook command lines), and each
    sample's controller memory per group run (the PSS of its ansible-playbook and forks, MiB)."""
    while not stop.is_set():
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        # Distinct run ids: each ansible-playbook's forks carry its command line too.
        groups: dict[str, int] = {}
        for line in out.splitlines():
            pid, _space, args = line.strip().partition(" ")
            run = re.search(r"-k1-g\d+", args) if "aorta_multinode" in args else None
            if run:
                groups[run.group(0)] = groups.get(run.group(0), 0) + pss_kb(pid)
        found.append(len(groups))
        if groups:
            memory.append(sum(groups.values()) / len(groups) / 1024)
        time.sleep(0.2)


def campaign(tmp: Path) -> tuple[float, dict, int, float]:
    where = tmp / "campaign"
    extra = {"aorta_results_dir": str(where), "aorta_training_overrides": PROFILE}
    samples: list[int] = []
    memory: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=watched_at_once, args=(stop, samples, memory), daemon=True)
    sampler.start()
    started = time.monotonic()
    proc = playbook("aorta.cluster.scaling", standin.OUT / "cluster.json", "-e", json.dumps(extra))
    took = time.monotonic() - started
    stop.set()
    sampler.join(5)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    return took, json.loads((where / "campaign.json").read_text()), max(samples or [0]), max(memory or [0.0])


def main() -> int:
    standin.up(NODES)
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-scaling-", dir=REPO / "build") as tmp:
            one_run(Path(tmp), 1)  # the first run on fresh nodes copies py-spy to each: apart
            runs = {size: one_run(Path(tmp), size) for size in (NODES, 1, 2)}
            runs["top"] = one_run(Path(tmp), NODES)
            took, document, at_once, group_mib = campaign(Path(tmp))
    finally:
        standin.down()
    total = sum(runs.values())
    print(f"one run per rung: opening {runs[NODES]:.1f} s, k1 {runs[1]:.1f}, k2 {runs[2]:.1f}, k4 {runs['top']:.1f}")
    print(f"campaign: {took:.1f} s, rungs {[r['size'] for r in document['rungs']]}, verdict {document['verdict']}")
    print(f"rung 1: {at_once} group runs alive at once, each one SSH command per poll to its own head")
    print(
        f"at 64 nodes rung 1 would run min(64, aorta_scaling_parallel={PARALLEL}) at once: not equal (no campaign head)"
    )
    # Why a group per ansible-playbook cannot run a 1000-node rung at once: the controller's memory.
    print(
        f"controller memory per group run at rung 1: {group_mib:.0f} MiB (PSS of its ansible-playbook and forks, "
        f"the most seen); all 1000 groups of a 1000-node rung 1 at once: {group_mib * 1000 / 1024:.0f} GiB"
    )
    print(
        f"BENCH scaling campaign_s={took:.1f} runs_sum_s={total:.1f} ratio={took / total:.2f} "
        f"rung1_runs_at_once={at_once} group_run_mib={group_mib:.0f} nodes={NODES} "
        f"cores={os.cpu_count()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
