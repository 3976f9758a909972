"""Health-check benchmark on a healthy stand-in node: what the health checks add to the one probe.

Measured in one run, alternating, on one Docker-in-Docker node reached over SSH:
  probe_s           aorta.cluster.node_probe as preflight calls it, health checks off (median task wall)
  probe_health_s    the same with the health checks on (the STAND-IN amd-smi answers: five GPU tool
                    steps, the kernel log, the NIC)
  added_s           the difference; ratio = probe_health_s / probe_s
  in_module_s       the health checks' own time inside the module (median of facts.health.seconds)
The stand-in tool is a small Python script; a real amd-smi takes longer per call (docs/health.md).
Last line: BENCH health key=value ...
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from _standin_bench import BIN, REPO, standin

ROUNDS = 8


def play(rounds: int) -> str:
    """Probes alternating off/on, each its own task, so that the task log times each one."""
    health = {"step_timeout": 30, "since_dir": "/var/tmp/aorta-cluster", "fabric_ip": "{{ aorta_vpc_ip }}"}
    tasks = []
    for index in range(rounds):
        for mode in ("off", "on"):
            args = {"docker": "docker", "image": "{{ aorta_docker_image }}", "root": "{{ aorta_path }}"}
            args["expect"] = {"vpc_ip": "{{ aorta_vpc_ip }}", "min_free_gb": 0}
            if mode == "on":
                args["health"] = health
            tasks.append(
                {"name": f"probe {mode} {index}", "aorta.cluster.node_probe": args, "register": f"p_{mode}_{index}"}
            )
    # One line the benchmark reads back: each "on" probe's own time inside the module.
    seconds = ", ".join(f"p_on_{index}.facts.health.seconds" for index in range(rounds))
    tasks.append(
        {"name": "health seconds", "ansible.builtin.debug": {"msg": "HEALTH_SECONDS {{ [" + seconds + "] | to_json }}"}}
    )
    return json.dumps([{"hosts": "aorta_nodes", "gather_facts": False, "tasks": tasks}])


def main() -> int:
    standin.up(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            book, log = Path(tmp) / "bench_health.yml", Path(tmp) / "tasks.jsonl"
            book.write_text(play(ROUNDS))
            env = dict(
                os.environ,
                ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                ANSIBLE_NOCOLOR="1",
                ANSIBLE_DISPLAY_OK_HOSTS="true",  # the line read back below is a debug task's
                ANSIBLE_CALLBACKS_ENABLED="aorta_task_log",
                ANSIBLE_CALLBACK_PLUGINS=str(REPO / "benchmarks" / "callback_plugins"),
                AORTA_TASK_LOG=str(log),
            )
            argv = [str(BIN / "ansible-playbook"), str(book), "-i", str(standin.OUT / "cluster.json")]
            proc = subprocess.run(
                [*argv, "-e", f"@{standin.OUT / 'vars.yml'}"],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-2000:])
            rows = [json.loads(line) for line in log.read_text().splitlines()]
            walls = {"off": [], "on": []}
            for row in rows:
                if row["task"].startswith("probe ") and row["status"] == "ok":
                    walls[row["task"].split()[1]].append(row["end"] - row["start"])
            inside = json.loads(proc.stdout.split("HEALTH_SECONDS ", 1)[1].split('"', 1)[0])
    finally:
        standin.down()
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    print(
        f"BENCH health probe_s={off:.3f} probe_health_s={on:.3f} added_s={on - off:.3f} ratio={on / off:.2f} "
        f"in_module_s={statistics.median(inside):.3f} rounds={ROUNDS}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
