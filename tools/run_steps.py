#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""`make test`'s steps side by side: each chain runs its make targets one after another, the
chains at once (the integration tests' stand-in runs leave the two cores idle for much of their
wall time, so the lint, sanity, unit and molecule steps fill it).

    tools/run_steps.py "ruff typecheck ansible-lint sanity unit molecule" "integration"

Each step's output goes to build/test-logs/<step>.log, and one line says when it ends; a failed
step's last lines are printed at once, so a failure names its step. At the end: the last chain's
last step's log whole (the integration tests: pytest's slowest tests and its summary), a table of
each step's seconds, and one closing line over the pytest steps' counts. Exits non-zero when any
step failed (a failed step ends its own chain, not the others).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "build" / "test-logs"
TAIL_LINES = 150
# pytest's closing line, e.g. "=== 1323 passed, 2 skipped in 192.41s (0:03:12) ===".
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")
PYTEST_SUMMARY = re.compile(r"^=+ .*\b(passed|failed|error|no tests ran)\b.* in [\d.]+s.*=+$")


class Step:
    def __init__(self, name: str) -> None:
        self.name = name
        self.log = LOGS / f"{name}.log"
        self.seconds: float | None = None
        self.rc: int | None = None

    def run(self, say) -> bool:
        started = time.monotonic()
        say(f"{self.name}: started (log: {self.log.relative_to(REPO)})")
        with open(self.log, "w", encoding="utf-8") as out:
            proc = subprocess.run(
                ["make", "--no-print-directory", self.name],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        self.rc, self.seconds = proc.returncode, time.monotonic() - started
        if self.rc == 0:
            say(f"{self.name}: passed in {self.seconds:.0f} s")
            return True
        tail = self.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
        say(f"{self.name}: FAILED (exit {self.rc}) in {self.seconds:.0f} s; its last lines:\n" + "\n".join(tail))
        return False

    def counts(self) -> dict[str, int]:
        """pytest's closing counts in this step's log ({} for a step that is not pytest)."""
        found: dict[str, int] = {}
        if not self.log.exists():
            return found
        for line in self.log.read_text(errors="replace").splitlines():
            if PYTEST_SUMMARY.match(line.strip()):
                for number, word in PYTEST_COUNT.findall(line):
                    key = "errors" if word.startswith("error") else word
                    found[key] = found.get(key, 0) + int(number)
        return found


def main(chains: list[str]) -> int:
    if not chains:
        print(__doc__, file=sys.stderr)
        return 2
    LOGS.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    began = time.monotonic()

    def say(text: str) -> None:
        with lock:
            print(f"[run_steps {time.monotonic() - began:6.0f}s] {text}", flush=True)

    plan = [[Step(name) for name in chain.split()] for chain in chains]

    def run_chain(steps: list[Step]) -> None:
        for step in steps:
            if not step.run(say):
                for skipped in steps[steps.index(step) + 1 :]:
                    say(f"{skipped.name}: not run ({step.name} failed)")
                return

    threads = [threading.Thread(target=run_chain, args=(steps,)) for steps in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began

    last = plan[-1][-1]
    if last.log.exists():
        print(f"\n===== {last.name}: {last.log.relative_to(REPO)} =====", flush=True)
        sys.stdout.write(last.log.read_text(errors="replace"))
    steps = [step for steps in plan for step in steps]
    width = max(len(step.name) for step in steps)
    print(f"\n{'step'.ljust(width)}  seconds  result")
    for step in steps:
        seconds = "-" if step.seconds is None else f"{step.seconds:.0f}"
        result = "not run" if step.rc is None else ("passed" if step.rc == 0 else f"FAILED (exit {step.rc})")
        print(f"{step.name.ljust(width)}  {seconds:>7}  {result}")
    failed = [step.name for step in steps if step.rc != 0]
    print(f"{'wall'.ljust(width)}  {wall:7.0f}  {'failed: ' + ', '.join(failed) if failed else 'every step passed'}")
    totals: dict[str, int] = {}
    for step in steps:
        for key, number in step.counts().items():
            totals[key] = totals.get(key, 0) + number
    failures = totals.get("failed", 0) + totals.get("errors", 0) + (1 if failed and not totals.get("failed") else 0)
    # The closing line any CI reads: every pytest step's counts together (a failed step that is not
    # pytest counts as one failure, so the line never says 0 failed when a step failed).
    print(f"tests: {totals.get('passed', 0)} passed, {failures} failed, {totals.get('skipped', 0)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main(sys.argv[1:]))
