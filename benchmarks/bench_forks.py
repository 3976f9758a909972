"""Controller memory per fork: what forks >= nodes costs on a large cluster.

With forks >= nodes (docs/scale.md: no node waits for a fork, the main process does not loop
waiting for one), a 1000-node run keeps about 1000 ansible-playbook worker processes alive on the
controller. Measured in one run: the
summed PSS of all ansible-playbook processes while a task holds every fork open, at a baseline of
10 forks and at N forks (AORTA_BENCH_FORKS, default 200), local connection (so no ssh processes).
  per_fork_mb   (PSS at N - PSS at 10) / (workers at N - workers at 10)
  ratio         PSS at N / PSS at 10
  est_1000_gb   per_fork_mb x 1000: controller memory for 1000 nodes' workers, ssh not included
Last line: BENCH forks key=value ...
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
FORKS = int(os.environ.get("AORTA_BENCH_FORKS", "200"))
HOLD_S = 25


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def family(root: int) -> list[int]:
    """The playbook process and its forked workers (same command line, parent chain to root)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        pid, ppid, args = line.split(None, 2)
        if "ansible-playbook" in args:
            children.setdefault(int(ppid), []).append(int(pid))
    found, todo = [root], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def measure(forks: int, work: Path) -> tuple[int, int]:
    """Peak (workers, summed PSS KiB) while `forks` hosts each hold a fork with a sleeping task."""
    (work / "hosts.ini").write_text("[nodes]\n" + "".join(f"h{i} ansible_connection=local\n" for i in range(forks)))
    (work / "play.yml").write_text(
        "---\n- hosts: nodes\n  gather_facts: false\n  tasks:\n"
        f"    - name: Hold a fork open\n      ansible.builtin.command: sleep {HOLD_S}\n      changed_when: false\n"
    )
    (work / "ansible.cfg").write_text("[defaults]\n")  # none of the checkout's settings
    env = dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_CONFIG=str(work / "ansible.cfg"))
    proc = subprocess.Popen(
        [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.ini"), str(work / "play.yml"), "--forks", str(forks)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = (0, 0)
    while proc.poll() is None:
        pids = family(proc.pid)
        total = sum(pss_kib(pid) for pid in pids)
        if total > peak[1]:
            peak = (len(pids) - 1, total)
        time.sleep(0.5)
    if proc.returncode != 0:
        raise RuntimeError(f"ansible-playbook with {forks} forks exited {proc.returncode}")
    return peak


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base_workers, base = measure(10, Path(tmp))
        workers, total = measure(FORKS, Path(tmp))
    per_fork_mb = (total - base) / max(workers - base_workers, 1) / 1024
    print(
        f"10 forks: {base_workers} workers {base / 1024:.0f} MB, {FORKS} forks: {workers} workers {total / 1024:.0f} MB"
    )
    print(
        f"BENCH forks forks={FORKS} workers={workers} pss_mb={total / 1024:.0f} baseline_mb={base / 1024:.0f} "
        f"ratio={total / base:.1f} per_fork_mb={per_fork_mb:.1f} est_1000_gb={per_fork_mb * 1000 / 1024:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
