# SPDX-License-Identifier: GPL-3.0-or-later
"""The execution environment for real: `make ee` builds the image here (ansible-builder, a
debootstrapped base), and the pipeline runs INSIDE it the way an AWX execution node runs a job
(ansible-runner, docker, the private data directory mounted), against 2 stand-in nodes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import ee_job  # tests/standin, put on sys.path by conftest
import pytest
import standin
from conftest import machine_share

REPO = Path(__file__).resolve().parents[2]

# The image's build and the job inside it take the whole machine (conftest.machine_share).
pytestmark = [pytest.mark.standin, pytest.mark.whole_machine]


@pytest.fixture(scope="session")
def ee_image():
    started = time.monotonic()
    with machine_share(whole=True):
        proc = subprocess.run(
            ["tools/build_ee.sh"], cwd=REPO, capture_output=True, text=True, check=False, timeout=1800
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    image = proc.stdout.strip().splitlines()[-1].removeprefix("EE_IMAGE=")
    print(f"make ee: {image} in {time.monotonic() - started:.0f}s")
    return image


def test_the_pipeline_completes_inside_the_execution_environment(standin_cluster, ee_image, tmp_path):
    cluster = standin_cluster.cluster_file(tmp_path, 2)
    results_root = tmp_path / "results"
    rc, out, pdd = ee_job.run_job(ee_image, tmp_path / "job", results_root, ident="ee", cluster_json=cluster)
    assert rc == 0, out[-4000:]
    # It ran in the image: the collection the image installed, the image's Python.
    command = json.loads((pdd / "artifacts" / "ee" / "command").read_text())["command"]
    assert command[:2] == ["docker", "run"] and ee_image in command
    # Only the job's private data directory and the results are mounted, never this checkout.
    mounts = [command[i + 1] for i, word in enumerate(command) if word == "-v"]
    assert mounts and not [m for m in mounts if m.startswith(str(REPO))], mounts
    data = ee_job.stats(pdd, "ee")
    assert data["aorta_run_status"] == "COMPLETED" and data["aorta_failed_nodes"] == []
    # The results are on the host, complete, the report decoded fast (msgspec in the image).
    run = json.loads(Path(data["aorta_run_json"]).read_text())
    assert [n["state"] for n in run["nodes"]] == ["ok", "ok"]
    manifest = json.loads(Path(data["aorta_manifest"]).read_text())
    assert manifest["missing_ranks"] == [] and manifest["nodes_not_collected"] == []
    report = json.loads(Path(data["aorta_report"]).read_text())
    assert report["status"] == "completed"
    assert report["tools"]["fast_decoder"] is True, report["tools"]
    assert report["tools"]["python"] == "/usr/bin/python3"  # the image's, not this venv's
    assert Path(data["aorta_report_html"]).is_file()
    # The Machine credential's key never reaches the job output or its events.
    key_body = (standin.OUT / "id_ed25519").read_text().splitlines()[1]
    assert key_body not in out
    events = "".join(p.read_text() for p in (pdd / "artifacts" / "ee" / "job_events").glob("*.json"))
    assert key_body not in events
    assert standin_cluster.containers_left() == []
