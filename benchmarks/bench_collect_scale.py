"""Trace collection at scale (issue 41): `aorta_collect_traces` `all` against `sample` on the light
stand-in cluster (tests/standin/scale.py, 64 sshd-only nodes on this machine's one Docker engine),
the real playbook over SSH, forks 32, the light workload with 2 ranks per node, in one bench run.

The light workload writes no profiler trace, so before each run every node gets real ones, planted
under the run's output directory (`<aorta_path>/aorta_runs/<run_id>/torch_profiler/rank<r>/trace.json`,
the layout Aorta writes), with a fixed `aorta_run_id` and `aorta_collect_since: 0` (the files are
older than the launch's start floor): rank r's trace is the real 8-rank DLRM fixture
`tests/fixtures/traces/set2/dlrm-rank<r % 8>.json.gz`, decompressed, its `distributedInfo` rewritten
to `{"rank": r, "world_size": 2 x nodes}` (about 1.6 MB per node). One node (SLOW_NODE, 37 of 64)
is made slow as a whole: its ranks' compute kernels last 1.35x, their collectives 0.3x (it arrives
last and waits least), so the report names it and the pull after the report brings it and the node
after it, as a real run's would; with the 2 nodes drawn at random and the head, 5 nodes' traces
come in full in sample mode. The fabric sweep is off (SWEEP below says why).

Keys (per mode, `_all` and `_sample`):
  bytes_all, bytes_sample    bytes of the files that reached the controller's disk for the run:
                             every file under <results>/combined_traces/ but manifest.json, plus
                             <results>/node_summaries/ (sample: 64 summaries, the head's traces,
                             and the traces the pull after the report brought)
  sample_ratio               bytes_sample / bytes_all (target <= 0.10)
  bytes_per_node_all, _sample   the same divided by the node count
  trace_bytes_per_node       bytes_all / nodes: one node's files as they land (traces, rank logs)
  summary_bytes_per_node     <results>/node_summaries/ / nodes (gzip JSON, sample mode)
  pulled_nodes               nodes whose traces are in combined_traces in full in sample mode
                             (manifest entries with `collected` true: the head and the pull's)
  wire_bytes_all, _sample, wire_ratio
                             bytes the 64 nodes' management interfaces sent (tx_bytes, read in each
                             node's network namespace): from the start of the end step's task to
                             the next task's start, plus (sample) the pull task's likewise. What
                             crosses the wire: compressed streams, the summaries, ssh and TCP
                             overhead, the end step's other commands (the same in both modes)
  end_result_kb_max_all, _sample
                             the largest JSON size of an `aorta.cluster.node_end` task result (the
                             registered `aorta_end`) among the nodes, kB of 1000 bytes (target < 64)
  end_main_cpu_ms_per_node_all, _sample
                             ansible-playbook's main process's own CPU (user + system) from the
                             end step's task start to the next task's start (the callback's own
                             work taken out), divided by the node count
  report_s_all, _sample      the report's task ("Analyse the traces", aorta.cluster.trace_parse)
  pull_s_sample              the pull task (aorta.cluster.trace_pull, its whole loop)
Measured by benchmarks/callback_plugins/aorta_collect_scale.py. Exit 1 unless sample_ratio <= 0.10
and end_result_kb_max_sample < 64. Last line: BENCH collect-scale key=value ...
  AORTA_BENCH_COLLECT_SCALE_NODES (64), AORTA_BENCH_COLLECT_SCALE_FORKS (32) for a quicker try.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "standin"))

import scale  # noqa: E402  (beside the tests, not a package)
from _standin_bench import subset  # noqa: E402

BIN = Path(sys.executable).parent
NODES = int(os.environ.get("AORTA_BENCH_COLLECT_SCALE_NODES", "64"))
FORKS = int(os.environ.get("AORTA_BENCH_COLLECT_SCALE_FORKS", "32"))
RANKS_PER_NODE = 2
FIXTURE = REPO / "tests" / "fixtures" / "traces" / "set2" / "dlrm-rank{}.json.gz"
FIXTURE_RANKS = 8
SLOW_NODE = max(1, NODES * 37 // 64)  # not the head (collected anyway), not the last (next is the head)
SLOW_COMPUTE, SLOW_COLLECTIVE = 1.35, 0.3
TARGET_RATIO, TARGET_KB = 0.10, 64.0
# The fabric sweep off: on this machine its streams between 64 containers share 2 cores, and it named
# 11 of 64 nodes' links slow in the first run of this bench (2026-12-06), each pulled with the node
# after it (23 nodes in full, sample_ratio 0.37): the CPU, not a link. AORTA_BENCH_COLLECT_SCALE_SWEEP=1
# keeps it on.
SWEEP = os.environ.get("AORTA_BENCH_COLLECT_SCALE_SWEEP", "0") == "1"


def bodies() -> dict[tuple[int, bool], tuple[dict, str]]:
    """Per fixture rank and slowness: (the trace's other keys, its traceEvents as JSON)."""
    out = {}
    for index in range(FIXTURE_RANKS):
        with gzip.open(str(FIXTURE).format(index)) as handle:
            trace = json.loads(handle.read())
        for slow in (False, True):
            events = trace["traceEvents"]
            if slow:
                events = [dict(e) for e in events]
                for event in events:
                    if event.get("cat") == "kernel" and "dur" in event:
                        nccl = "nccl" in str(event.get("name", "")).lower()
                        event["dur"] = event["dur"] * (SLOW_COLLECTIVE if nccl else SLOW_COMPUTE)
            meta = {k: v for k, v in trace.items() if k != "traceEvents"}
            out[(index, slow)] = (meta, json.dumps(events))
    return out


def plant(state: dict, run_id: str, made: dict) -> int:
    """Every node's ranks' traces under the run's output directory; the bytes written."""
    world = NODES * RANKS_PER_NODE
    written = 0
    for index, node in enumerate(state["nodes"][:NODES]):
        for local in range(RANKS_PER_NODE):
            rank = index * RANKS_PER_NODE + local
            meta, events = made[(rank % FIXTURE_RANKS, index == SLOW_NODE)]
            info = {"backend": (meta.get("distributedInfo") or {}).get("backend", "nccl"), "rank": rank}
            head = dict(meta, distributedInfo=dict(info, world_size=world))
            folder = Path(node["aorta_path"]) / "aorta_runs" / run_id / "torch_profiler" / f"rank{rank}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "trace.json"
            path.write_text(json.dumps(head)[:-1] + ', "traceEvents": ' + events + "}")
            written += path.stat().st_size
    return written


def management_interfaces(state: dict) -> list[list]:
    """[pid, interface] per node: a process of its container and the interface of its management
    network, to read its tx_bytes in its own network namespace."""
    names = [node["container"] for node in state["nodes"][:NODES]]
    template = "{{.State.Pid}} {{(index .NetworkSettings.Networks " + json.dumps(scale.MGMT) + ").MacAddress}}"
    rows = subprocess.run(
        ["docker", "inspect", "-f", template, *names], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    found = []
    for name, row in zip(names, rows):
        pid, mac = row.split()
        net = Path(f"/proc/{pid}/root/sys/class/net")
        iface = next((p.name for p in net.iterdir() if (p / "address").read_text().strip() == mac), None)
        if iface is None:
            raise RuntimeError(f"{name}: no interface with the management network's address {mac}")
        found.append([int(pid), iface])
    return found


def tree_bytes(root: Path, skip: tuple[str, ...] = ()) -> int:
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name not in skip)


def window(marks: list[dict], action: str) -> dict | None:
    """From the start of the task of ``action`` to the next task's start (or the play's end): wall
    seconds, the main process's CPU (the callback's own taken out), the nodes' tx bytes."""
    for i, mark in enumerate(marks):
        if mark["kind"] == "task" and mark.get("action") == action and i + 1 < len(marks):
            nxt = marks[i + 1]
            own = nxt["own_cpu"] - mark["own_cpu"]
            tx = None if mark["tx"] is None or nxt["tx"] is None else nxt["tx"] - mark["tx"]
            return {"wall_s": nxt["t"] - mark["t"], "cpu_s": nxt["cpu"] - mark["cpu_after"] - own, "tx": tx}
    return None


def run(mode: str, tmp: Path, state: dict, made: dict, net_file: Path) -> dict:
    run_id = f"cscale-{mode}-{uuid.uuid4().hex[:6]}"
    planted = plant(state, run_id, made)
    log = tmp / f"{run_id}.jsonl"
    inventory = tmp / f"{run_id}.json"
    subset(NODES, inventory, scale.OUT)
    if not (tmp / "host_vars").exists():
        (tmp / "host_vars").symlink_to(scale.OUT / "host_vars")
    results = tmp / run_id
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="aorta_collect_scale",
        AORTA_COLLECT_SCALE_LOG=str(log),
        AORTA_COLLECT_SCALE_NET=str(net_file),
    )
    extra = {
        "aorta_run_id": run_id,
        "aorta_results_dir": str(results),
        "aorta_collect_traces": mode,
        # The planted files predate the launch's start floor: take every file of the run's directory.
        "aorta_collect_since": 0,
        "aorta_nproc_per_node": RANKS_PER_NODE,
        "aorta_fabric_sweep": SWEEP,
    }
    out = tmp / f"{run_id}.out"
    t0 = time.monotonic()
    with open(out, "w") as handle:
        rc = subprocess.run(
            [str(BIN / "ansible-playbook"), "aorta_multinode.yml", "-i", str(inventory), "--forks", str(FORKS),
             "-e", f"@{scale.OUT / 'vars.yml'}", "-e", json.dumps(extra)],
            cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, text=True, timeout=1800, check=False,
        ).returncode  # fmt: skip
    play_s = time.monotonic() - t0
    run_json = results / "run.json"
    if rc != 0:
        why = json.loads(run_json.read_text()).get("message") if run_json.exists() else ""
        (REPO / "build").mkdir(exist_ok=True)
        (REPO / "build" / f"{run_id}.out").write_text(out.read_text())
        if (results / "logs").is_dir():  # each node's launch and end details, for the failure's cause
            shutil.copytree(results / "logs", REPO / "build" / f"{run_id}.logs", dirs_exist_ok=True)
        raise RuntimeError(f"{mode} run failed (rc {rc}): {why} (output in build/{run_id}.out, .logs)")
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    marks = [r for r in rows if r["kind"] in ("task", "stats")]
    results_of = [r for r in rows if r["kind"] == "result"]
    ends = [r for r in results_of if r["action"] == "aorta.cluster.node_end"]
    if len(ends) != NODES or any(r["status"] != "ok" for r in ends):
        raise RuntimeError(f"{mode}: node_end results {len(ends)} of {NODES}, not all ok (output in {out})")

    def span(action: str) -> float | None:
        done = [r for r in results_of if r["action"] == action and r["start"] and r["status"] != "skipped"]
        return max(r["end"] for r in done) - min(r["start"] for r in done) if done else None

    combined = results / "combined_traces"
    manifest = json.loads((combined / "manifest.json").read_text())
    entries = manifest["nodes"]
    collected = [e for e in entries if e.get("collected")]
    on_node = [e for e in entries if e.get("on_node")]
    summaries = results / "node_summaries"
    summary_files = sorted(summaries.glob("node_*.json.gz")) if summaries.is_dir() else []
    # What the figures stand for must be whole: every node's traces (all), every node's summary and
    # every node either collected or listed on its node (sample).
    if mode == "all" and len(collected) != NODES:
        raise RuntimeError(f"all: {len(collected)} of {NODES} nodes collected: {manifest.get('nodes_not_collected')}")
    if mode == "sample" and (len(summary_files) != NODES or len(collected) + len(on_node) != NODES):
        raise RuntimeError(
            f"sample: {len(summary_files)} summaries, {len(collected)} collected and {len(on_node)} on their node, "
            f"of {NODES} nodes"
        )
    report_path = results / "aorta_benchmark_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    end = window(marks, "aorta.cluster.node_end")
    pull = window(marks, "aorta.cluster.trace_pull")
    wire = end["tx"] if end and end["tx"] is not None else None
    if mode == "sample" and wire is not None:
        wire = None if not pull or pull["tx"] is None else wire + pull["tx"]
    slow_name = state["nodes"][SLOW_NODE]["mgmt_ip"]
    return {
        "run_id": run_id,
        "play_s": play_s,
        "planted": planted,
        "combined_bytes": tree_bytes(combined, skip=("manifest.json",)),
        "summary_bytes": tree_bytes(summaries),
        "collected": collected,
        "end_kb_max": max(r["size"] for r in ends) / 1000,
        "end_kb_median": sorted(r["size"] for r in ends)[len(ends) // 2] / 1000,
        "end_cpu_ms_per_node": 1000 * end["cpu_s"] / NODES,
        "end_wall_s": end["wall_s"],
        "report_s": span("aorta.cluster.trace_parse"),
        "pull_s": span("aorta.cluster.trace_pull"),
        "wire": wire,
        "slow_named": any(
            str(n.get("node")) in (slow_name, state["nodes"][SLOW_NODE]["container"])
            for n in report.get("slow_nodes") or []
        ),
        "slow_nodes": [n.get("node") for n in report.get("slow_nodes") or []],
    }


def main() -> int:
    started = time.monotonic()
    made = bodies()
    try:
        state = scale.up(NODES)
        with tempfile.TemporaryDirectory(prefix="aorta-bench-collect-scale-") as tmp_name:
            tmp = Path(tmp_name)
            net_file = tmp / "net.json"
            net_file.write_text(json.dumps(management_interfaces(state)))
            every = run("all", tmp, state, made, net_file)
            say("all", every)
            sample = run("sample", tmp, state, made, net_file)
            say("sample", sample)
    finally:
        scale.down()
    return report(every, sample, time.monotonic() - started)


def say(label: str, figures: dict) -> None:
    """One mode's figures, printed as soon as its run is measured."""
    print(
        f"{label}: play {figures['play_s']:.1f}s, planted {figures['planted'] / 1e6:.1f} MB on {NODES} nodes; "
        f"on the controller: combined_traces {figures['combined_bytes'] / 1e6:.2f} MB, node_summaries "
        f"{figures['summary_bytes'] / 1e6:.3f} MB; end step {figures['end_wall_s']:.1f}s, node_end result "
        f"median {figures['end_kb_median']:.1f} kB, max {figures['end_kb_max']:.1f} kB; nodes' management "
        f"tx {fmt(figures['wire'] and figures['wire'] / 1e6, '.2f')} MB; report {fmt(figures['report_s'], '.1f')}s; "
        f"slow nodes named {figures['slow_nodes']}",
        flush=True,
    )


def fmt(value: float | None, spec: str) -> str:
    return "nan" if value is None else format(value, spec)


def report(every: dict, sample: dict, wall_s: float) -> int:
    bytes_all = every["combined_bytes"] + every["summary_bytes"]
    bytes_sample = sample["combined_bytes"] + sample["summary_bytes"]
    ratio = bytes_sample / bytes_all
    wire_ratio = sample["wire"] / every["wire"] if every["wire"] and sample["wire"] is not None else None
    pulled = sample["collected"]
    why = [f"{e['name']} ({(e.get('pulled') or {}).get('why', 'at its end step: the head')})" for e in pulled]
    print(
        f"sample: traces in full from {len(pulled)} nodes (fabric sweep {'on' if SWEEP else 'off'}): " + "; ".join(why)
    )
    if not sample["slow_named"]:
        print(f"note: the report did not name the slowed node {SLOW_NODE}; the pull took only the sample")
    print(f"bench wall time {wall_s:.0f}s")
    print(
        f"BENCH collect-scale nodes={NODES} forks={FORKS} ranks_per_node={RANKS_PER_NODE} "
        f"bytes_all={bytes_all} bytes_sample={bytes_sample} sample_ratio={ratio:.4f} "
        f"bytes_per_node_all={bytes_all / NODES:.0f} bytes_per_node_sample={bytes_sample / NODES:.0f} "
        f"trace_bytes_per_node={every['combined_bytes'] / NODES:.0f} "
        f"summary_bytes_per_node={sample['summary_bytes'] / NODES:.0f} pulled_nodes={len(pulled)} "
        f"wire_bytes_all={every['wire']} wire_bytes_sample={sample['wire']} wire_ratio={fmt(wire_ratio, '.4f')} "
        f"end_result_kb_max_all={every['end_kb_max']:.1f} end_result_kb_max_sample={sample['end_kb_max']:.1f} "
        f"end_main_cpu_ms_per_node_all={every['end_cpu_ms_per_node']:.0f} "
        f"end_main_cpu_ms_per_node_sample={sample['end_cpu_ms_per_node']:.0f} "
        f"report_s_all={fmt(every['report_s'], '.1f')} report_s_sample={fmt(sample['report_s'], '.1f')} "
        f"pull_s_sample={fmt(sample['pull_s'], '.1f')} "
        f"targets=sample_ratio<={TARGET_RATIO},end_result_kb_max_sample<{TARGET_KB:.0f}"
    )
    failed = []
    if ratio > TARGET_RATIO:
        failed.append(f"sample_ratio {ratio:.4f} > {TARGET_RATIO}")
    if sample["end_kb_max"] >= TARGET_KB:
        failed.append(f"end_result_kb_max_sample {sample['end_kb_max']:.1f} >= {TARGET_KB:.0f}")
    if failed:
        print("bench_collect_scale: target missed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
