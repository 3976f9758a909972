"""History benchmark: a results root of 1000 runs, its index rebuilt, then one run added at a time.

Builds 1000 synthetic runs in a temporary root (each a run.json made from docs/samples/run.json on 16
nodes with a 72-key effective config, and a small aorta_benchmark_report.json; four fingerprints:
two images, two override sets;
one run in ten FAILED), then measures in this one run:
  rebuild_s         _history.rebuild of the root: every run.json and report read once (seconds)
  add_s             _history.update for one new run with 1000 in the index (median of 7 adds: the
                    index read, the row added, index.json and index.html rewritten under the lock)
                    (target <= 1 s: add_vs_target = add_s / 1.0)
  page_mb           index.html's size with 1000 runs (target < 5: page_vs_target = page_mb / 5)
  add_vs_json_dump  add_s / the time to json.dump the same index once, measured here: what an add
                    costs against only writing the index it must write anyway
Last line: BENCH history key=value ...
"""

from __future__ import annotations

import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._run_context import effective_config  # noqa: E402
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history  # noqa: E402

RUNS, NODES, ADDS = 1000, 16, 7
SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
START = 1_790_000_000
IMAGES = ("sha256:" + "2d" * 32, "sha256:" + "7a" * 32)
OVERRIDES = ({"training.max_steps": 200}, {"training.max_steps": 200, "training.batch_size": 16})
# A base config of the size of Aorta's own (config/distributed.yaml flattens to 72 keys): 4 sections
# of 18 keys; each run.json's context.effective_config is it with the run's overrides.
BASE_CONFIG = "".join(
    f"{section}:\n" + "".join(f"  key_{n:02d}: {n * 1.5}\n" for n in range(18))
    for section in ("training", "model", "dataset", "optimizer")
)


def run_doc(index: int, rng: random.Random) -> dict:
    run = copy.deepcopy(SAMPLE)
    node = SAMPLE["nodes"][0]
    started = START + index * 3600
    run["run_id"] = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started)) + f"-{index:06x}"
    run["started_epoch"], run["finished_epoch"] = started, started + 900
    run["status"] = "FAILED" if rng.random() < 0.1 else "COMPLETED"
    overrides = OVERRIDES[(index // 2) % 2]
    run["context"].update(
        image_id=IMAGES[index % 2],
        overrides=overrides,
        nodes=NODES,
        gpus_per_node=8,
        effective_config=effective_config(BASE_CONFIG, overrides),
    )
    run["nodes"] = [dict(copy.deepcopy(node), name=f"mi300x-{n:04d}", rank=n) for n in range(NODES)]
    run["verdict"] = {"verdict": "PASS" if run["status"] == "COMPLETED" else "FAIL", "reasons": []}
    return run


def report_doc(rng: random.Random) -> dict:
    step = 100.0 * rng.gauss(1, 0.03)
    return {
        "status": "completed",
        "performance": {"avg_step_time_ms": step, "avg_iteration_time_ms": step * 6},
        "run": {"samples_per_second": 8 * 128 / (step / 1000), "tokens_per_second": 8 * 128 * 4096 / (step / 1000)},
        "slow_nodes": [{"node": "mi300x-0007"}] if rng.random() < 0.05 else [],
        "stragglers": [{"rank": 61, "node": "mi300x-0007"}] if rng.random() < 0.05 else [],
    }


def make_run(root: Path, index: int, rng: random.Random) -> Path:
    run = run_doc(index, rng)
    path = root / run["run_id"]
    path.mkdir()
    (path / "run.json").write_text(json.dumps(run, indent=4))
    if run["status"] == "COMPLETED":
        (path / "aorta_benchmark_report.json").write_text(json.dumps(report_doc(rng)))
        (path / "report.html").write_text("<!DOCTYPE html><title>report</title>")
    return path


def json_dump_s(root: Path) -> float:
    """The floor: json.dump of the index as it is, once (median of 5), to a file in the root."""
    document = json.loads((root / "index.json").read_text())
    times = []
    for _round in range(5):
        started = time.perf_counter()
        with open(root / "floor.json", "w") as handle:
            json.dump(document, handle, separators=(",", ":"), sort_keys=True)
        times.append(time.perf_counter() - started)
    os.unlink(root / "floor.json")
    return statistics.median(times)


def main() -> int:
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="aorta-bench-history-") as name:
        root = Path(name)
        for index in range(RUNS):
            make_run(root, index, rng)
        started = time.perf_counter()
        rebuilt = _history.rebuild(str(root))
        rebuild_s = time.perf_counter() - started
        adds = []
        for index in range(RUNS, RUNS + ADDS):
            path = make_run(root, index, rng)
            started = time.perf_counter()
            result = _history.update(str(root), str(path))
            adds.append(time.perf_counter() - started)
        add_s = statistics.median(adds)
        floor = json_dump_s(root)
        page_mb = os.path.getsize(result["index_html"]) / 1e6
        index_mb = os.path.getsize(result["index_json"]) / 1e6
        print(
            f"{rebuilt['runs']} runs rebuilt in {rebuild_s:.2f} s; {ADDS} adds {', '.join(f'{a:.3f}' for a in adds)} s "
            f"(index of {result['runs']} runs, index.json {index_mb:.2f} MB, index.html {page_mb:.2f} MB); "
            f"json.dump of the index {floor:.3f} s"
        )
        print(
            f"BENCH history runs={RUNS} add_s={add_s:.3f} rebuild_s={rebuild_s:.2f} page_mb={page_mb:.2f} "
            f"add_vs_target={add_s / 1.0:.3f} page_vs_target={page_mb / 5:.2f} add_vs_json_dump={add_s / floor:.1f} "
            "targets=add_s<=1,page_mb<5"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
