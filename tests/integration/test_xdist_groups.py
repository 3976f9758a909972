# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared runs rest on ``--dist loadgroup`` keeping a group on one worker (docs/testing.md):
the hook in xdist_groups.py, run by pytest-xdist on a folder of its own. Without it, under
pytest 9.2 and pytest-xdist 3.8, the grouped tests of this folder split over both workers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

TESTS = """
import os
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    pass
"""


def test_loadgroup_sends_every_test_of_a_group_to_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from xdist_groups import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_grouped.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v", "-rA"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # "[gw0] [ 12%] PASSED test_grouped.py::test_grouped[0]@shared"
    ran = re.findall(r"\[(gw\d+)\] \[ *\d+%\] PASSED test_grouped\.py::(test_\w+)\[(\d)\](@\w+)?", done.stdout)
    grouped = [(worker, suffix) for worker, name, _i, suffix in ran if name == "test_grouped"]
    assert len(grouped) == 6 and len(ran) == 12, done.stdout[-3000:]
    assert {suffix for _w, suffix in grouped} == {"@shared"}, grouped
    assert len({worker for worker, _s in grouped}) == 1, grouped
