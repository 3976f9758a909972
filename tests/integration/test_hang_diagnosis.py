# SPDX-License-Identifier: GPL-3.0-or-later
"""Why a run stopped, on the stand-in cluster: the hung rank named with its node, frame and
operation from the capture at the deadline, and a node's kernel-log trouble named with its node."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.standin

TRAIN = Path(__file__).parents[2] / "tests" / "standin" / "workload" / "train.py"

# TEST DOUBLE of the kernel log reader's input, on one node only: the stand-in nodes share the
# host's kernel, so a line written to /dev/kmsg would show in every node's dmesg (and the host's).
# journalctl is the reader's first choice, so a journalctl on PATH that prints one planted kernel
# line is what this node's log "says"; the other nodes read their real dmesg. The line is dated after
# the fixture planted it: a window that starts before then (preflight's look back to the previous
# probe, which its health check reads) does not hold it; the run's own window does.
PLANTED = "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin! (planted by test_hang_diagnosis)"
SHIM = """#!/bin/sh
# test double installed by tests/integration/test_hang_diagnosis.py; removed after the test
since=0
while [ $# -gt 0 ]; do
  if [ "$1" = --since ]; then since=${{2#@}}; shift; fi
  shift
done
[ "$since" -ge {planted_at} ] || exit 0
echo "$(date -u +%Y-%m-%dT%H:%M:%S.000000+0000) $(hostname) kernel: {planted}"
"""


@pytest.fixture
def planted_kernel_line(standin_cluster, tmp_path):
    index = 1
    container = standin_cluster.nodes[index]["container"]
    shim = tmp_path / "journalctl"
    shim.write_text(SHIM.format(planted_at=int(time.time()), planted=PLANTED))
    shim.chmod(0o755)
    subprocess.run(["docker", "cp", str(shim), f"{container}:/usr/local/bin/journalctl"], check=True)
    yield standin_cluster.nodes[index]["mgmt_ip"], container
    standin_cluster.node_exec(index, "rm", "-f", "/usr/local/bin/journalctl")


def recv_line() -> int:
    """The line of the stand-in's never-answered receive in this checkout's train.py."""
    for number, line in enumerate(TRAIN.read_text().splitlines(), 1):
        if "dist.recv(" in line:
            return number
    raise AssertionError("train.py has no dist.recv")


def test_hang_names_rank_1_on_the_head_with_its_frame_and_the_kernel_line_with_its_node(
    standin_cluster, tmp_path, planted_kernel_line
):
    planted_node, _container = planted_kernel_line
    two = standin_cluster.cluster_file(tmp_path, 2)
    head = standin_cluster.nodes[0]["mgmt_ip"]
    proc, run, results, elapsed = standin_cluster.run(
        tmp_path,
        inventory=two,
        aorta_training_overrides={"standin.hang_rank": 1},
        aorta_timeout_seconds=60,
        aorta_kill_grace_seconds=10,
    )
    assert run is not None and run["status"] == "TIMEOUT", proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode != 0
    assert elapsed < 240, elapsed
    diagnosis = run["diagnosis"]
    assert diagnosis["kind"] == "hang" and diagnosis["method"] == "flight recorder", diagnosis
    (behind,) = diagnosis["behind"]
    assert behind["rank"] == 1 and behind["node"] == head
    assert behind["frame"] == f"train.py:{recv_line()} in main"
    assert behind["stuck_in"].startswith("recv (torch/distributed/")
    assert behind["last_op"].startswith("gloo:") and isinstance(behind["seq"], int)
    assert re.fullmatch(r"ranks 0, 2, 3 in gloo:\w+ #\d+", diagnosis["waiting"]), diagnosis["waiting"]
    # Every rank's stack and dump arrived, and the paths are under the results directory.
    assert diagnosis["ranks_with_stacks"] == diagnosis["ranks_with_flight_recorder"] == 4
    assert all((results / p).is_file() for p in diagnosis["evidence"]) and len(diagnosis["evidence"]) == 8
    for node in run["nodes"]:
        assert node["capture_s"] is not None and node["capture_s"] <= 30, node
    # The planted line, named with the node that logged it, and only there.
    planted = [e for e in diagnosis["node_errors"] if PLANTED in e["line"]]
    assert [(e["node"], e["kind"]) for e in planted] == [(planted_node, "amdgpu")]
    html = (results / "report.html").read_text()
    assert html.index("Why it stopped") < html.index("Headline")
    assert behind["frame"] in html and PLANTED in html
    assert json.dumps(diagnosis["summary"])[1:-1] in proc.stdout  # the play's table says it
    assert standin_cluster.containers_left() == []
    for i in range(2):
        assert "torchrun" not in standin_cluster.node_exec(i, "ps", "-eo", "args")
