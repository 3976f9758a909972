# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/run_steps.py, `make test`'s runner: chains side by side, a failure named by its step and
not stopping the steps after it, the table of seconds and the closing line of counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MAKEFILE = """\
lint:
\t@echo lint fine
unit:
\t@echo "============ 5 passed, 1 skipped in 0.10s ============"
broken:
\t@echo the reason it broke; exit 3
after:
\t@echo "============ 2 passed in 0.20s ============"
integration:
\t@sleep 0.3; echo "============ 1 failed, 4 passed in 9.00s (0:00:09) ============"; exit 1
"""


def run_steps(tmp_path: Path, *chains: str) -> subprocess.CompletedProcess:
    (tmp_path / "Makefile").write_text(MAKEFILE)
    argv = [sys.executable, str(REPO / "tools" / "run_steps.py"), "--makefile", str(tmp_path / "Makefile")]
    argv += ["--logs", str(tmp_path / "logs"), *chains]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def test_every_step_passing_exits_0_with_a_table_and_the_counts(tmp_path):
    proc = run_steps(tmp_path, "lint unit", "after")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "tests: 7 passed, 0 failed, 1 skipped"
    table = lines[lines.index(next(line for line in lines if line.startswith("step "))) :]
    assert [row.split()[0] for row in table[1:4]] == ["lint", "unit", "after"]
    assert all(row.split()[-1] == "passed" for row in table[1:4])
    assert table[4].startswith("wall") and table[4].endswith("every step passed")
    assert (tmp_path / "logs" / "lint.log").read_text().strip() == "lint fine"


def test_a_nice_chain_runs_at_the_lowest_priority(tmp_path):
    (tmp_path / "Makefile").write_text("prio:\n\t@echo nice=$$(nice)\n")
    argv = [sys.executable, str(REPO / "tools" / "run_steps.py"), "--makefile", str(tmp_path / "Makefile")]
    proc = subprocess.run([*argv, "--logs", str(tmp_path), "nice: prio"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and (tmp_path / "prio.log").read_text().strip() == "nice=19", proc.stdout


def test_a_failed_step_is_named_with_its_last_lines_and_the_steps_after_it_still_run(tmp_path):
    proc = run_steps(tmp_path, "lint broken after", "integration")
    assert proc.returncode == 1
    out = proc.stdout
    assert "broken: FAILED (exit 2)" in out and "the reason it broke" in out  # make's own exit is 2
    assert "after: passed" in out  # the chain went on
    # The last chain's last step's log is printed whole, then the table and the closing line.
    assert out.index("===== integration:") < out.rindex("1 failed, 4 passed in 9.00s") < out.index("\nstep ")
    assert out.splitlines()[-2].endswith("failed: broken, integration")
    assert out.splitlines()[-1] == "tests: 6 passed, 2 failed, 0 skipped"
