"""Scale benchmark on the light stand-in cluster (tests/standin/scale.py): the real playbook on 4
and on 64 nodes, forks 32, over real SSH; light STAND-IN workload (no torch) that still
rendezvous over TCP on the head's fabric address.

  task_results_per_node     task results on the busiest node over the whole play (skipped tasks,
                            includes and argument-spec checks count: each forks a worker), 64 nodes
  prelaunch_tasks_per_node  the same, before the launch task started
  main_cpu_ms_per_node      the ansible-playbook main process's own CPU, slope (64 - 4) / 60
  cpu_s_per_node            the whole controller's CPU (its forks and ssh too), slope (64 - 4) / 60
  ssh_per_poll_4, _64       remote commands the controller's waits made per poll while the run was
                            in flight (run_watch's polls, and any node's own wait meanwhile)
  t_detect_s                a third run on 4 nodes with a 900 s deadline: one node's container
                            killed once every rank trains, to the playbook's end

  remote_tasks_per_node  module runs on the busiest node from play start to all ranks started
                         (counted from the task events; controller-side tasks excluded)
  t4_s, t64_s            play start -> all ranks started ("Initialised distributed training")
  t_ratio                t64_s / t4_s (no target: on this machine the nodes share its cores)
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
    "aorta.cluster.run_watch",
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


def process_cpu_s(pid: int) -> float | None:
    """One process's own user + system CPU (not its children's), seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """Machine and container CPU every 0.2 s, to read them at the moment all ranks started, and the
    ansible-playbook main process's own CPU (its last reading before it exits)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float, float | None]] = []
        self.done = threading.Event()
        self.pid: int | None = None
        self.main_cpu_s = 0.0

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.time(), busy_cpu_s(), docker_cpu_s()))
            if self.pid is not None:
                self.main_cpu_s = process_cpu_s(self.pid) or self.main_cpu_s
            self.done.wait(0.2)

    def at(self, when: float) -> tuple[float, float | None]:
        """(busy, containers) CPU seconds from the first sample to the last one before ``when``."""
        first = self.samples[0]
        last = max((s for s in self.samples if s[0] <= when), key=lambda s: s[0], default=first)
        node = None if first[2] is None or last[2] is None else last[2] - first[2]
        return last[1] - first[1], node


def all_ranks_training(state: dict, nodes: int, output_dir: str) -> bool:
    """Every node's ranks have written a step (rank_<rr>_metrics.jsonl is not empty)."""
    for node in state["nodes"][:nodes]:
        files = list((Path(node["aorta_path"]) / output_dir).glob("rank_*_metrics.jsonl"))
        if not files or not all(f.stat().st_size > 0 for f in files):
            return False
    return True


def ssh_per_poll(events: list[dict]) -> float:
    """Remote commands the waits made per poll of the run's watch, while the watch ran."""
    watch = [e for e in events if e["action"] == "aorta.cluster.run_watch" and e["status"] != "skipped"]
    if not watch or not watch[0]["polls"]:
        return float("nan")
    begin, end = watch[0]["start"], watch[0]["end"]
    meanwhile = [
        e
        for e in events
        if e["action"] in ("aorta.cluster.run_wait", "aorta.cluster.node_end")
        and e["start"]
        and e["start"] < end
        and e["polls"]
    ]
    return (watch[0]["polls"] + sum(e["polls"] for e in meanwhile if e["end"] > begin)) / watch[0]["polls"]


def run(nodes: int, tmp: Path, state: dict, kill: int | None = None) -> dict:
    """The playbook on the first ``nodes`` nodes; with ``kill``, that node's container is killed
    once every rank trains (900 s deadline) and ``t_detect_s`` is the time to the playbook's end."""
    run_id = f"scale-{nodes}-{'kill-' if kill is not None else ''}{uuid.uuid4().hex[:6]}"
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
    if kill is not None:
        extra.update(aorta_timeout_seconds=900, aorta_training_overrides={"training.max_steps": 10**6})
    sampler = Sampler()
    sampler.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    out = tmp / f"{run_id}.out"
    with open(out, "w") as log:
        proc = subprocess.Popen(
            [str(BIN / "ansible-playbook"), "aorta_multinode.yml", "-i", str(inventory), "--forks", str(FORKS),
             "-e", f"@{scale.OUT / 'vars.yml'}", "-e", json.dumps(extra)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        sampler.pid = proc.pid
        killed_at = None
        if kill is not None:
            while not all_ranks_training(state, nodes, f"aorta_runs/{run_id}") and proc.poll() is None:
                time.sleep(0.5)
            # The node and its workload container die together, as on a real node.
            node = state["nodes"][kill]["container"]
            job = f"{node}-job-{run_id}"
            subprocess.run(["docker", "kill", job, node], capture_output=True, check=True)
            killed_at = time.time()
        rc = proc.wait(timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.done.set()
    sampler.join()
    run_json = tmp / run_id / "run.json"
    if kill is not None:
        record = json.loads(run_json.read_text()) if run_json.exists() else {}
        named = record.get("first_failure") == state["nodes"][kill]["mgmt_ip"]
        return {"t_detect_s": time.time() - killed_at, "named": named, "message": record.get("message")}
    if rc != 0:
        why = json.loads(run_json.read_text())["message"] if run_json.exists() else out.read_text()[-4000:]
        (REPO / "build").mkdir(exist_ok=True)
        (REPO / "build" / f"{run_id}.out").write_text(out.read_text())
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
    launch = min(e["start"] for e in events if e["action"] == "aorta.cluster.node_launch" and e["start"])
    prelaunch = Counter(e["host"] for e in events if (e["start"] or 0) < launch)
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
        "main_cpu_s": sampler.main_cpu_s,
        "host_tasks": max(count for host, count in host_tasks.items() if host != "localhost"),
        "prelaunch_tasks": max(count for host, count in prelaunch.items() if host != "localhost"),
        "ssh_per_poll": ssh_per_poll(events),
        "busy_cpu_s": busy,
        "node_cpu_s": node_cpu,
    }


def main() -> int:
    state = scale.up(NODES)
    try:
        with tempfile.TemporaryDirectory(prefix="aorta-bench-scale-") as tmp:
            small = run(4, Path(tmp), state)
            large = run(NODES, Path(tmp), state)
            detect = run(4, Path(tmp), state, kill=3)
            return report(small, large, detect)
    finally:
        scale.down()


def report(small: dict, large: dict, detect: dict) -> int:
    per_node = large["cpu_s"] / NODES
    slope = (large["cpu_s"] - small["cpu_s"]) / (NODES - 4)
    main_slope_ms = 1000 * (large["main_cpu_s"] - small["main_cpu_s"]) / (NODES - 4)
    print(
        f"4 nodes: all ranks started after {small['t_s']:.1f}s (play {small['wall_s']:.1f}s); "
        f"{NODES} nodes: {large['t_s']:.1f}s (play {large['wall_s']:.1f}s), forks {FORKS}; "
        f"module runs per node before the ranks started: max {large['remote_max']}, "
        f"head {large['remote_counts'].most_common(1)[0]}; controller CPU {large['cpu_s']:.1f}s "
        f"({per_node:.2f}s per node), main process {large['main_cpu_s']:.1f}s"
    )
    print(f"killed node: run ended {detect['t_detect_s']:.1f}s after the kill; named first: {detect['named']}")
    cores = os.cpu_count() or 1
    for label, figures in (("4", small), (str(NODES), large)):
        node_cpu = "?" if figures["node_cpu_s"] is None else f"{figures['node_cpu_s']:.1f}"
        print(
            f"{label} nodes: host_tasks_per_node={figures['host_tasks']} busy_cpu_s={figures['busy_cpu_s']:.1f} "
            f"(containers {node_cpu}) until all ranks started; on {cores} cores no less than "
            f"{figures['busy_cpu_s'] / cores:.1f}s against {figures['t_s']:.1f}s measured"
        )
    print(
        f"BENCH scale nodes={NODES} forks={FORKS} task_results_per_node={large['host_tasks']} "
        f"prelaunch_tasks_per_node={large['prelaunch_tasks']} main_cpu_ms_per_node={main_slope_ms:.0f} "
        f"cpu_s_per_node={slope:.2f} ssh_per_poll_4={small['ssh_per_poll']:.2f} "
        f"ssh_per_poll_{NODES}={large['ssh_per_poll']:.2f} t_detect_s={detect['t_detect_s']:.1f} "
        f"remote_tasks_per_node={large['remote_max']} t4_s={small['t_s']:.1f} t{NODES}_s={large['t_s']:.1f} "
        f"t_ratio={large['t_s'] / small['t_s']:.2f} "
        "targets=task_results_per_node<=4,prelaunch_tasks_per_node<=2,main_cpu_ms_per_node<=60,"
        "cpu_s_per_node<=0.3,ssh_per_poll_4=ssh_per_poll_64,t_detect_s<=60"
    )
    return 0 if detect["named"] else 1


if __name__ == "__main__":
    sys.exit(main())
