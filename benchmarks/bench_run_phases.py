"""Where one healthy stand-in run's wall time goes: aorta_multinode.yml on 3 stand-in nodes, as the
integration tests run it (their vars, a 1 s fabric sweep, the stand-in's default steps), split by
phase from the task log (benchmarks/callback_plugins/aorta_task_log.py) and the head's supervisor
events (its status file on the node):

  controller   ansible-playbook's start, the inventory and run_begin, until the first node's probe
  preflight    node_prepare on every node (probe, health, lease, the fabric check)
  launch       node_launch on every node (the container's start, the supervisor's start)
  join_sweep   the head's supervisor from its start to "joined" (every node's join and the sweep)
  training     "joined" to the workload's exit on the head (rendezvous, the steps, the traces)
  end          from the workload's exit to the last node_end (teardown, collection of the traces)
  report       from the last node_end to the playbook's end (trace_parse, the record, the outcome)

Rounds (AORTA_BENCH_PHASES_ROUNDS, default 3) give medians. This is a profile, not a target: the
last line, BENCH run-phases, gives each phase's median seconds and its share of the run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _standin_bench import node_exec, playbook, standin

ROUNDS = max(1, int(os.environ.get("AORTA_BENCH_PHASES_ROUNDS", "3")))
PHASES = ("controller", "preflight", "launch", "join_sweep", "training", "end", "report")


def supervisor_events(container: str, run_id: str) -> dict[str, float]:
    """The head supervisor's events (``what`` -> wall time), from its status file."""
    status = json.loads(node_exec(container, "cat", f"/var/tmp/aorta-cluster/runs/{run_id}.json"))
    events: dict[str, float] = {}
    for event in status.get("events", []):
        events.setdefault(event["what"].split(":")[0], event["at"])
    events["started"] = status["started_at"]
    return events


def one_run(tmp: Path, state: dict) -> dict[str, float]:
    run_id = f"phases-{uuid.uuid4().hex[:6]}"
    task_log = tmp / f"{run_id}.tasks"
    extra = {"aorta_run_id": run_id, "aorta_results_dir": str(tmp / run_id)}
    t0 = time.time()
    proc = playbook("aorta_multinode.yml", standin.OUT / "cluster.json", "-e", json.dumps(extra), task_log=task_log)
    t_end = time.time()
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:])
    rows = [json.loads(line) for line in task_log.read_text().splitlines()]

    def span(action: str) -> tuple[float, float]:
        mine = [r for r in rows if r["action"] == f"aorta.cluster.{action}" and r["start"]]
        return min(r["start"] for r in mine), max(r["end"] for r in mine)

    prepare, launch, end = span("node_prepare"), span("node_launch"), span("node_end")
    events = supervisor_events(state["nodes"][0]["container"], run_id)
    joined = events["joined the head's aggregator"]
    exited = next(at for what, at in events.items() if what.startswith("exited"))
    return {
        "controller": prepare[0] - t0,
        "preflight": prepare[1] - prepare[0],
        "launch": launch[1] - launch[0],
        "join_sweep": joined - events["started"],
        "training": exited - joined,
        "end": end[1] - exited,
        "report": t_end - end[1],
        "total": t_end - t0,
    }


def main() -> int:
    state = standin.up(3)
    samples: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-phases-") as tmp:
            one_run(Path(tmp), state)  # the first run on fresh nodes copies py-spy to each: apart
            samples = [one_run(Path(tmp), state) for _round in range(ROUNDS)]
    finally:
        standin.down()
    mid = {name: statistics.median(s[name] for s in samples) for name in (*PHASES, "total")}
    for name in (*PHASES, "total"):
        shown = " ".join(f"{s[name]:.1f}" for s in samples)
        print(f"{name:11} median {mid[name]:5.1f} s  ({shown})")
    parts = " ".join(f"{name}_s={mid[name]:.1f}" for name in PHASES)
    shares = " ".join(f"{name}_share={mid[name] / mid['total']:.2f}" for name in PHASES)
    print(f"BENCH run-phases total_s={mid['total']:.1f} {parts} {shares} rounds={ROUNDS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
