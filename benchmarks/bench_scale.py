"""Scale benchmark on the light stand-in cluster (tests/standin/scale.py): the real playbook on 4
and on 64 nodes, forks 32, over real SSH; light STAND-IN workload (no torch) that still
rendezvous over TCP on the head's fabric address.

  remote_tasks_per_node  module runs on the busiest node from play start to all ranks started
                         (counted from the task events; controller-side tasks excluded)
  t4_s, t64_s            play start -> all ranks started ("Initialised distributed training")
  t_ratio                t64_s / t4_s (target <= 2.0)
  cpu_s_per_node         controller CPU (ansible-playbook, its forks and ssh) per node, 64-node run
                         (target <= 0.5)
Also printed, to say what bounds the figures on this machine (not targets):
  host_tasks_per_node    task results per node over the whole play, skipped and controller-side
                         ones included: each costs the controller a forked worker
  busy_cpu_s             every core's busy time (/proc/stat) from play start to all ranks started:
                         controller, the light nodes' sshd and module runs, and the workload,
                         which share this machine's cores; node_cpu_s is the containers' part
                         (cgroup cpuacct). busy_cpu_s / cores is the least t64_s could be here.
Last line: BENCH scale key=value ...
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "standin"))

import scale  # noqa: E402  (beside the tests, not a package)
from _standin_bench import subset  # noqa: E402

BIN = Path(sys.executable).parent
NODES = int(os.environ.get("AORTA_BENCH_SCALE_NODES", "64"))
FORKS = int(os.environ.get("AORTA_BENCH_SCALE_FORKS", "32"))
# Task actions that run on the controller only, whatever host they are listed under.
LOCAL = {
    "ansible.builtin.set_fact",
    "ansible.builtin.debug",
    "ansible.builtin.assert",
    "ansible.builtin.fail",
    "ansible.builtin.include_role",
    "ansible.builtin.include_tasks",
    "ansible.builtin.include_vars",
    "ansible.builtin.meta",
    "ansible.builtin.add_host",
    "ansible.builtin.set_stats",
    "ansible.builtin.validate_argument_spec",
    # Waits with one raw read of the status file per poll: no module runs on the node.
    "aorta.cluster.run_wait",
    "set_fact",
    "debug",
    "assert",
    "fail",
    "include_role",
    "meta",
    "validate_argument_spec",
}


def scale_subset(nodes: int, path: Path) -> Path:
    """The first ``nodes`` light nodes, with their host_vars beside the file, where Ansible looks."""
    subset(nodes, path, scale.OUT)
    link = path.parent / "host_vars"
    if not link.exists():
        link.symlink_to(scale.OUT / "host_vars")
    return path


def ranks_started(state: dict, nodes: int, output_dir: str) -> float:
    latest = 0.0
    for node in state["nodes"][:nodes]:
        for log in (Path(node["aorta_path"]) / output_dir).glob("rank*.log"):
            for line in log.read_text().splitlines():
                if "Initialised distributed training" in line:
                    stamp = dt.datetime.strptime(line.split(" | ")[0], "%Y-%m-%d %H:%M:%S,%f")
                    latest = max(latest, stamp.replace(tzinfo=dt.timezone.utc).timestamp())
    if not latest:
        raise RuntimeError("no rank started")
    return latest


def remote_tasks(events: list[dict], until: float) -> Counter:
    per_node: Counter = Counter()
    for event in events:
        if event["status"] == "skipped" or event["action"] in LOCAL or (event["start"] or 0) > until:
            continue
        where = event["delegate_to"] or event["host"]
        if where in ("localhost", "127.0.0.1"):
            continue
        per_node[where] += 1
    return per_node


DOCKER_CPU = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")  # cgroup v1, cgroupfs driver


def busy_cpu_s() -> float:
    """Busy time of every core since boot (user, nice, system, irq, softirq, steal), seconds."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy / os.sysconf("SC_CLK_TCK")


def docker_cpu_s() -> float | None:
    try:
        return int(DOCKER_CPU.read_text()) / 1e9
    except (OSError, ValueError):
        return None


class Sampler(threading.Thread):
    """Machine and container CPU every 0.2 s, to read them at the moment all ranks started."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float, float | None]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.time(), busy_cpu_s(), docker_cpu_s()))
            self.done.wait(0.2)

    def at(self, when: float) -> tuple[float, float | None]:
        """(busy, containers) CPU seconds from the first sample to the last one before ``when``."""
        first = self.samples[0]
        last = max((s for s in self.samples if s[0] <= when), key=lambda s: s[0], default=first)
        node = None if first[2] is None or last[2] is None else last[2] - first[2]
        return last[1] - first[1], node


def run(nodes: int, tmp: Path, state: dict) -> dict:
    run_id = f"scale-{nodes}-{uuid.uuid4().hex[:6]}"
    task_log = tmp / f"{run_id}.tasks"
    inventory = scale_subset(nodes, tmp / f"{run_id}.json")
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="aorta_task_log",
        AORTA_TASK_LOG=str(task_log),
    )
    extra = {"aorta_run_id": run_id, "aorta_results_dir": str(tmp / run_id)}
    sampler = Sampler()
    sampler.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "aorta_multinode.yml", "-i", str(inventory), "--forks", str(FORKS),
         "-e", f"@{scale.OUT / 'vars.yml'}", "-e", json.dumps(extra)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        run_json = tmp / run_id / "run.json"
        why = json.loads(run_json.read_text())["message"] if run_json.exists() else proc.stdout[-4000:]
        (REPO / "build").mkdir(exist_ok=True)
        (REPO / "build" / f"{run_id}.out").write_text(proc.stdout)
        raise RuntimeError(f"{nodes}-node run failed: {why} (output in build/{run_id}.out)")
    started = ranks_started(state, nodes, f"aorta_runs/{run_id}")
    left = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=aorta.cluster.run={run_id}", "--format", "{{.Names}} {{.Status}}"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    if left:  # every node's supervisor and the teardown remove them: one left is a defect
        raise RuntimeError(f"{nodes}-node run {run_id} left containers: {left}")
    events = [json.loads(line) for line in task_log.read_text().splitlines()]
    counts = remote_tasks(events, started)
    host_tasks = Counter(event["host"] for event in events)
    busy, node_cpu = sampler.at(started)
    spans: dict[str, list[float]] = {}
    for event in events:
        if event["start"] and event["status"] != "skipped":
            span = spans.setdefault(event["task"], [event["start"], event["end"]])
            span[0], span[1] = min(span[0], event["start"]), max(span[1], event["end"])
    slowest = sorted(spans.items(), key=lambda item: item[1][1] - item[1][0], reverse=True)[:6]
    print(f"{nodes} nodes, slowest tasks: " + "; ".join(f"{name} {end - begin:.1f}s" for name, (begin, end) in slowest))
    return {
        "t_s": started - t0,
        "wall_s": time.time() - t0,
        "remote_max": max(counts.values()),
        "remote_counts": counts,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "host_tasks": max(count for host, count in host_tasks.items() if host != "localhost"),
        "busy_cpu_s": busy,
        "node_cpu_s": node_cpu,
    }


def main() -> int:
    state = scale.up(NODES)
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-scale-") as tmp:
            small = run(4, Path(tmp), state)
            large = run(NODES, Path(tmp), state)
    finally:
        scale.down()
    per_node = large["cpu_s"] / NODES
    print(
        f"4 nodes: all ranks started after {small['t_s']:.1f}s (play {small['wall_s']:.1f}s); "
        f"{NODES} nodes: {large['t_s']:.1f}s (play {large['wall_s']:.1f}s), forks {FORKS}; "
        f"module runs per node before the ranks started: max {large['remote_max']}, "
        f"head {large['remote_counts'].most_common(1)[0]}; controller CPU {large['cpu_s']:.1f}s"
    )
    cores = os.cpu_count() or 1
    for label, figures in (("4", small), (str(NODES), large)):
        node_cpu = "?" if figures["node_cpu_s"] is None else f"{figures['node_cpu_s']:.1f}"
        print(
            f"{label} nodes: host_tasks_per_node={figures['host_tasks']} busy_cpu_s={figures['busy_cpu_s']:.1f} "
            f"(containers {node_cpu}) until all ranks started; on {cores} cores no less than "
            f"{figures['busy_cpu_s'] / cores:.1f}s against {figures['t_s']:.1f}s measured"
        )
    print(
        f"BENCH scale nodes={NODES} forks={FORKS} remote_tasks_per_node={large['remote_max']} "
        f"t4_s={small['t_s']:.1f} t{NODES}_s={large['t_s']:.1f} t_ratio={large['t_s'] / small['t_s']:.2f} "
        f"cpu_s_per_node={per_node:.2f} targets=remote_tasks_per_node<=6,t_ratio<=2.0,cpu_s_per_node<=0.5"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
