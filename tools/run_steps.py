# SPDX-License-Identifier: GPL-3.0-or-later
"""`make test`'s steps side by side: each chain runs its make targets one after another, the
chains at once (the integration tests' stand-in runs leave the two cores idle for much of their
wall time, so the lint, sanity, unit and molecule steps fill it).

    tools/run_steps.py "nice: ruff typecheck ansible-lint sanity" "unit molecule integration"

A chain written "nice: ..." runs at the lowest CPU priority (nice 19): the integration tests'
stand-in nodes measure the fabric and time the ranks' steps, and a lint step that takes a core from
them at the wrong second makes a healthy link look slow (seen: a sweep naming a link at 0.3 of the
median while ansible-test's pylint and the unit tests ran beside it). The unit tests run first in
their chain, before the integration tests, so that their own sub-second bounds see a quiet machine.

Each step's output goes to build/test-logs/<step>.log, and one line says when it ends; a failed
step's last lines are printed at once, so a failure names its step, and the steps after it still
run (one run shows every failure). At the end: the last chain's last step's log whole (the
integration tests: pytest's slowest tests and its summary), a table of each step's seconds, and
one closing line over the pytest steps' counts. Exits non-zero when any step failed.
"""

from __future__ import annotations

import argparse
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
PYTEST_SUMMARY = re.compile(r"^=+ .*\b(passed|failed|errors?|skipped|no tests ran)\b.* in [\d.]+s.*=+$")


class Step:
    def __init__(self, name: str, logs: Path, make: list[str], nice: bool = False) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        self.make = make
        self.nice = nice  # at the lowest CPU priority: what the other chain measures is not slowed by it
        self.seconds: float | None = None
        self.rc: int | None = None

    def run(self, say) -> None:
        started = time.monotonic()
        say(f"{self.name}: started (log: {self.log})")
        with open(self.log, "w", encoding="utf-8") as out:
            proc = subprocess.run(
                [*(["nice", "-n", "19"] if self.nice else []), *self.make, self.name],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        self.rc, self.seconds = proc.returncode, time.monotonic() - started
        if self.rc == 0:
            say(f"{self.name}: passed in {self.seconds:.0f} s")
            return
        tail = self.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
        say(f"{self.name}: FAILED (exit {self.rc}) in {self.seconds:.0f} s; its last lines:\n" + "\n".join(tail))

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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("chains", nargs="+", help="make targets, space-separated, one chain per argument")
    parser.add_argument("--logs", type=Path, default=LOGS, help="where each step's log goes")
    parser.add_argument("--makefile", help="another Makefile than the checkout's")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    make = ["make", "--no-print-directory", *(["-f", args.makefile] if args.makefile else [])]
    chains = args.chains
    lock = threading.Lock()
    began = time.monotonic()

    def say(text: str) -> None:
        with lock:
            print(f"[run_steps {time.monotonic() - began:6.0f}s] {text}", flush=True)

    plan = []
    for chain in chains:
        nice = chain.startswith("nice:")
        plan.append([Step(name, args.logs, make, nice) for name in chain.removeprefix("nice:").split()])

    def run_chain(steps: list[Step]) -> None:
        for step in steps:  # a failed step does not stop the next: one run shows every failure
            try:
                step.run(say)
            except OSError as exc:  # make, nice or the log could not be had
                step.rc, step.seconds = 127, 0.0
                say(f"{step.name}: FAILED: could not start: {exc}")

    threads = [threading.Thread(target=run_chain, args=(steps,)) for steps in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began

    last = plan[-1][-1]
    if last.log.exists():
        print(f"\n===== {last.name}: {last.log} =====", flush=True)
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
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for step in steps:
        counts = step.counts()
        totals["passed"] += counts.get("passed", 0)
        totals["skipped"] += counts.get("skipped", 0)
        failures = counts.get("failed", 0) + counts.get("errors", 0)
        # A failed step with no failed test of its own (lint, sanity, molecule, a pytest that could
        # not start) counts as one failure: the line never says 0 failed when a step failed.
        totals["failed"] += failures or (1 if step.rc != 0 else 0)
    # The closing line any CI reads: every pytest step's counts together.
    print(f"tests: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main(sys.argv[1:]))
