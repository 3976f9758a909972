"""Diagnosis benchmark on the stand-in cluster (2 nodes, 2 ranks each): what the feature costs.

Measured in one run:
  on_s, off_s      median wall time of aorta_multinode.yml for a completed run (20 steps) with the
                   diagnosis on (flight recorder recording, py-spy on the node, kernel-log scan) and
                   off (aorta_diagnose=false, aorta_pyspy='', aorta_flight_recorder_entries=0,
                   aorta_kernel_log_scan=false), 3 runs each, alternated; one run with it on first,
                   not counted, sends py-spy to the nodes (once per node, by hash)
  overhead_ratio   on_s / off_s (target <= 1.05)
  capture_s        the longest capture at the deadline of a hang (standin.hang_rank=1; target <= 30)
Last line: BENCH diagnosis key=value ...
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _standin_bench import playbook, standin, subset

OVERRIDES = {"training.max_steps": 20, "profiling.active": 1, "profiling.wait": 0, "profiling.warmup": 0}
OFF = {
    "aorta_diagnose": False,
    "aorta_pyspy": "",
    "aorta_flight_recorder_entries": 0,
    "aorta_kernel_log_scan": False,
}


def run(tmp: Path, inventory: Path, expect: str, **extra) -> tuple[float, dict]:
    run_id = f"bench-diag-{uuid.uuid4().hex[:6]}"
    variables = {
        "aorta_run_id": run_id,
        "aorta_results_dir": str(tmp / run_id),
        "aorta_training_overrides": OVERRIDES,
        "aorta_collect_traces": expect != "COMPLETED",
        **extra,
    }
    started = time.monotonic()
    proc = playbook("aorta_multinode.yml", inventory, "-e", json.dumps(variables))
    took = time.monotonic() - started
    record = json.loads((tmp / run_id / "run.json").read_text())
    if record["status"] != expect:
        raise RuntimeError(f"{run_id}: {record['status']} (wanted {expect}): {proc.stdout[-3000:]}")
    return took, record


def main() -> int:
    standin.up(2)
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-diagnosis-") as name:
            tmp = Path(name)
            inventory = subset(2, tmp / "cluster.json")
            run(tmp, inventory, "COMPLETED")  # sends py-spy: a once-per-node cost, not per run
            on, off = [], []
            for _pair in range(3):
                on.append(run(tmp, inventory, "COMPLETED")[0])
                off.append(run(tmp, inventory, "COMPLETED", **OFF)[0])
            hang_overrides = dict(OVERRIDES, **{"standin.hang_rank": 1})
            _took, hung = run(
                tmp,
                inventory,
                "TIMEOUT",
                aorta_training_overrides=hang_overrides,
                aorta_timeout_seconds=20,
                aorta_kill_grace_seconds=5,
            )
    finally:
        standin.down()
    on_s, off_s = statistics.median(on), statistics.median(off)
    capture = max(n.get("capture_s") or 0.0 for n in hung["nodes"])
    named = [r["rank"] for r in hung["diagnosis"]["behind"]]
    print(f"completed run: on {', '.join(f'{x:.1f}' for x in on)} s; off {', '.join(f'{x:.1f}' for x in off)} s")
    print(f"hang: capture {capture:.2f} s, behind {named}: {hung['diagnosis']['summary']}")
    print(
        f"BENCH diagnosis overhead_ratio={on_s / off_s:.3f} on_s={on_s:.1f} off_s={off_s:.1f} "
        f"capture_s={capture:.2f} behind={','.join(map(str, named)) or 'none'} "
        "targets=overhead_ratio<=1.05,capture_s<=30"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
