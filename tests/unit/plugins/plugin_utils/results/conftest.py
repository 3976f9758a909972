# SPDX-License-Identifier: GPL-3.0-or-later
"""What the results tests share: a worker's failed preflight as node_prepare returned it, and a
run's results directory with its logs/."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

# A worker's failed preflight as node_prepare returned it before its result was shortened: the
# probe's facts (health included), what the controller derived, the lease, every failed check.
FAILURES = [
    "preflight[health]: gpu-node-07: 2 process(es) already hold a GPU: pid 4242 python3 (user bob), pid 4243 "
    "python3 (user bob) (stop them, or list a monitoring agent in aorta_gpu_process_allow)",
    "preflight[health]: gpu-node-07: 3 GPU/NIC error(s) in the kernel log since previous run (amdgpu, xgmi): "
    "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!",
    "preflight[disk]: gpu-node-07: 12.5 GiB free at /opt/aorta, 50 GiB needed",
]


def _failed_preflight() -> dict:
    health = {
        "tool": "amd-smi",
        "steps": [{"name": f"amd-smi {s}", "seconds": 0.8, "timed_out": False} for s in ("list", "static")],
        "count": {"logical": 8, "physical": 8, "partitioned": False, "error": ""},
        "processes": [{"pid": p, "name": "python3", "user": "bob", "allowed": False} for p in (4242, 4243)],
        "ecc": {"correctable": 12, "uncorrectable": 0, "gpus": []},
        "kernel": {"source": "journalctl", "error": "", "since_source": "previous run", "lines": []},
        "fingerprint": {"kernel": "6.8.0-45-generic", "rocm": "6.2.1", "amdgpu": "6.8.5", "gpu_model": "MI300X"},
    }
    health["kernel"]["lines"] = [{"kind": "amdgpu", "line": f"amdgpu 0000:c{i}:00.0: amdgpu: GPU reset"} for i in "123"]
    facts = {
        "docker": {"ok": True, "version": "27.1.1", "error": ""},
        "image_id": "sha256:" + "ab" * 32,
        "paths": {"config/distributed.yaml": True, "train.py": True},
        "disk": {"free_bytes": 13421772800, "total_bytes": 1099511627776},
        "gpu_devices": {"/dev/kfd": True, "/dev/dri": True},
        "interfaces": {"lo": ["127.0.0.1"], "eth0": ["10.0.0.7"], "ens51np0": ["192.168.20.7", "fe80::1"]},
        "tools": {"py-spy": False},
        "clock": 1796000000.25,
        "health": health,
    }
    derived = {
        "fabric_if": "ens51np0",
        "fabric_env": {"GLOO_SOCKET_IFNAME": "ens51np0", "NCCL_SOCKET_IFNAME": "ens51np0"},
        "bootstrap_ip": "192.168.20.7",
        "record": {"docker": "27.1.1", "image_present": True, "free_gib": 12.5, "clock_offset_s": 0.012},
        "health": {"tool": "amd-smi", "gpus": 8, "devices": 8, "processes": health["processes"], "kernel": 3},
        "fingerprint": dict(health["fingerprint"], docker="27.1.1"),
    }
    lease = {"result": "acquired", "run_id": "20250612-101500-3f2a", "previous": None, "message": "held"}
    return {
        "changed": False,
        "failed": True,
        "msg": f"{FAILURES[0]} (+2 more in run.json)",
        "failures": list(FAILURES),
        "own": True,
        "reached": True,
        "facts": facts,
        "derived": derived,
        "lease": lease,
        "invocation": {"module_args": {"root": "/opt/aorta", "paths": ["config/distributed.yaml", "train.py"]}},
        "_ansible_no_log": False,
    }


@pytest.fixture
def failed_preflight():
    """A fresh copy of the failed preflight for each call."""
    return _failed_preflight


@pytest.fixture
def results_with_logs():
    """A run's results directory with its logs/, as run_start makes it, at a path as long as a
    user's (``/tmp/aorta-<random>/aorta_results/<run id>``: pytest's own tmp_path runs longer)."""
    top = Path(tempfile.mkdtemp(prefix="aorta-", dir="/tmp"))
    results = top / "aorta_results" / "20250612-101500-3f2a"
    (results / "logs").mkdir(parents=True)
    yield results
    shutil.rmtree(top)
