# SPDX-License-Identifier: GPL-3.0-or-later
"""node_probe on this machine: one module run gathers, the action judges on the controller, and a
setup lease of an ansible-playbook of this controller that is gone is taken over at once."""

from __future__ import annotations

import json
import socket


def probe_task(tmp_path, **expect):
    (tmp_path / "aorta").mkdir(exist_ok=True)
    (tmp_path / "aorta" / "train.py").write_text("")
    return {
        "aorta.cluster.node_probe": {
            "root": str(tmp_path / "aorta"),
            "paths": ["train.py"],
            "lease": {"run_id": "probe-run", "directory": str(tmp_path / "lease"), "expires_in": 600},
            "port": {"addresses": ["0.0.0.0"], "start": 30100, "end": 30200},
            "expect": {"aorta_path": str(tmp_path / "aorta"), "paths": ["train.py"], "vpc_ip": "127.0.0.1", **expect},
        }
    }


def test_a_healthy_probe_derives_the_fabric_and_picks_a_port(play, tmp_path):
    _rc, out = play(probe_task(tmp_path, min_free_gb=0))
    assert not out.get("failed"), out.get("msg")
    assert out["derived"]["fabric_if"] == "lo" and out["derived"]["bootstrap_ip"] == "127.0.0.1"
    # The fabric link's facts, and its speed and MTU in the fingerprint, with no health checks asked.
    with open("/sys/class/net/lo/mtu") as handle:
        mtu = int(handle.read())
    assert out["derived"]["link"]["mtu"] == mtu and "rx_errors" in out["derived"]["link"]
    assert out["derived"]["fingerprint"]["link_mtu"] == mtu and "link_speed_mbps" in out["derived"]["fingerprint"]
    assert 30100 <= out["port"] <= 30200
    assert abs(out["derived"]["record"]["clock_offset_s"]) < 5
    assert out["lease"]["result"] == "acquired"


def test_failed_checks_are_judged_here_one_line_each(play, tmp_path):
    _rc, out = play(probe_task(tmp_path, min_free_gb=10**9, paths=["train.py", "config/missing.yaml"]))
    assert out["failed"]
    assert [f.split(":")[0] for f in out["failures"]] == ["preflight[aorta_path]", "preflight[disk]"]


def test_a_setup_lease_of_a_dead_ansible_playbook_here_is_taken_over(play, tmp_path):
    lease_dir = tmp_path / "lease"
    lease_dir.mkdir()
    owner = f"root@{socket.gethostname()} (ansible-playbook pid 999999999)"
    (lease_dir / "node.lease").write_text(
        json.dumps({"run_id": "dead", "owner": owner, "expires_at": 9e9, "holder_pid": None})
    )
    _rc, out = play(probe_task(tmp_path, min_free_gb=0))
    assert not out.get("failed"), out.get("msg")
    assert out["lease"]["previous"]["run_id"] == "dead"
    assert out["lease"]["previous"]["why"] == "its controller process is gone"
