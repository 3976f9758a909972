"""Report benchmark: the report of 1024 ranks against the floor of what any report must cost.

Builds 1024 rank traces (128 nodes x 8, about 60 MB of plain JSON in all, gloo-shaped: profiler
steps, CPU ops, one all-reduce per step; one node 30% slower), then measures in this one run:
  ratio_vs_floor  trace_report.yml on them (median of 3) / the floor: an ansible-playbook with one
                  task plus orjson.loads of the same files (target <= 2)
  html_mb         report.html's size at 1024 ranks (target < 10)
  s_8192          the report of 8192 ranks from per-node summaries (aorta_parse_on_nodes: no trace
                  on the controller), seconds (target < 60)
  slow_node       whether the slow node was named (1) or not (0)
Last line: BENCH report key=value ...
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NODES, PER_NODE, SLOW = 128, 8, 77
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


def rank_trace(rank: int, world: int, slow: bool, rng: random.Random) -> dict:
    events, t = [], 0.0
    for i in range(6):
        compute = 50_000.0 * (1.3 if slow else 1.0) * rng.gauss(1, 0.02)
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "ts": t,
                "dur": 100_000.0,
                "pid": 1,
                "tid": 1,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "standin_compute",
                "ts": t,
                "dur": compute,
                "pid": 1,
                "tid": 1,
            }
        )
        for k in range(60):
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "ts": t + k * 700.0,
                    "dur": 600.0,
                    "pid": 1,
                    "tid": 1,
                    "args": {"External id": k, "Input Dims": [[64, 64], [64, 64]]},
                }
            )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "ts": t + compute,
                "dur": 100_000.0 - compute,
                "pid": 1,
                "tid": 2,
            }
        )
        t += 100_000.0
    return {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": world}, "traceEvents": events}


def build_tree(root: Path) -> int:
    rng = random.Random(1)
    world, size = NODES * PER_NODE, 0
    for rank in range(world):
        node = rank // PER_NODE
        path = root / f"node_{node}" / "torch_profiler" / f"rank{rank}" / "trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rank_trace(rank, world, node == SLOW, rng)))
        size += path.stat().st_size
    manifest = {"nodes": [{"rank": n, "name": f"mi300x-{n:04d}"} for n in range(NODES)]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return size


def playbook(*argv: str) -> float:
    started = time.monotonic()
    subprocess.run([str(BIN / "ansible-playbook"), *argv], cwd=REPO, env=ENV, capture_output=True, check=True)
    return time.monotonic() - started


def floor(tmp: Path, files: list) -> float:
    one = tmp / "one.yml"
    one.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: x}\n")
    code = (
        "import orjson, sys, time\nt = time.monotonic()\n"
        "for p in sys.argv[1:]:\n    orjson.loads(open(p, 'rb').read())\nprint(time.monotonic() - t)\n"
    )
    loads = float(
        subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True, check=True).stdout
    )
    return playbook(str(one), "-i", "localhost,") + loads


def summaries_8192(tmp: Path) -> float:
    """The aorta_parse_on_nodes route at 8192 ranks: the report from per-node summaries."""
    code = f"""
import json, random, sys, time
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader([{str(REPO / ".collections")!r}])
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report
base = _analysis.safe_analyse(sys.argv[1])
rng = random.Random(2)
summaries = []
for rank in range(8192):
    s = dict(base, rank=rank, world_size=8192, node=f"mi300x-{{rank // 8:04d}}", file=f"rank{{rank}}/trace.json")
    scale = 1.3 if rank // 8 == 500 else 1.0
    s["step_compute_ms"] = [[k, v * scale * rng.gauss(1, 0.02)] for k, v in base["step_compute_ms"]]
    summaries.append(s)
t = time.monotonic()
report = _report.build_report(sys.argv[2], summaries=summaries)
_outputs.write_outputs(report, sys.argv[2])
print(time.monotonic() - t)
"""
    trace = next(tmp.rglob("trace.json"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(trace), str(tmp / "r8192")], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="aorta-bench-report-") as name:
        tmp = Path(name)
        root = tmp / "combined_traces"
        size = build_tree(root)
        files = [str(p) for p in sorted(root.rglob("trace.json"))]
        base = floor(tmp, files)
        runs = []
        for i in range(3):
            out = tmp / f"report{i}"
            # The tree has a slow node on purpose (a finding, which fails the verdict): kept a note,
            # so that the task's exit says the report was made.
            ignores = json.dumps({"aorta_verdict_ignores": ["slow_node", "straggler"]})
            args = ("-e", f"aorta_traces_dir={root}", "-e", f"aorta_report_dir={out}", "-e", ignores)
            runs.append(playbook("trace_report.yml", *args))
        report = json.loads((tmp / "report0" / "aorta_benchmark_report.json").read_text())
        html_mb = (tmp / "report0" / "report.html").stat().st_size / 1e6
        named = int([n["node"] for n in report["slow_nodes"]] == [f"mi300x-{SLOW:04d}"])
        s_8192 = summaries_8192(tmp)
        median = statistics.median(runs)
        print(
            f"{len(files)} traces, {size / 1e6:.0f} MB: trace_report.yml {', '.join(f'{r:.1f}' for r in runs)} s;"
            f" floor {base:.1f} s (one-task playbook + orjson.loads); 8192 ranks from summaries {s_8192:.1f} s"
        )
        print(
            f"BENCH report ranks={len(files)} ratio_vs_floor={median / base:.2f} html_mb={html_mb:.2f} "
            f"s_8192={s_8192:.1f} slow_node={named} targets=ratio<=2,html_mb<10,s_8192<60"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
