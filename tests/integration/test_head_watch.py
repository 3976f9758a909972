# SPDX-License-Identifier: GPL-3.0-or-later
"""The head's aggregator in a real run on the stand-in cluster: forged, replayed and junk datagrams
sent to it from a worker's node change nothing, and the run's secret is written nowhere."""

from __future__ import annotations

import ipaddress
import json
import os
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.standin

AORTA_PATH = "/root/aorta"  # the stand-in's aorta_path (tests/standin/standin.py)


def udp_ports_bound_on(standin_cluster, index: int, address: str) -> list[int]:
    """The UDP ports bound on ``address`` in node ``index`` (from /proc/net/udp: little-endian hex)."""
    want = ipaddress.IPv4Address(address).packed[::-1].hex().upper()
    ports = []
    for line in standin_cluster.node_exec(index, "cat", "/proc/net/udp").splitlines()[1:]:
        local = line.split()[1]
        host, port = local.split(":")
        if host == want:
            ports.append(int(port, 16))
    return ports


def send_datagrams(standin_cluster, index: int, secret: str, run_id: str, head: str, port: int) -> str:
    """From node ``index``'s Python: a failure forged with another key, a replay of the node's
    first message number (sealed with the right key, as a captured datagram would be), junk and an
    oversized datagram. Prints what came back (nothing is expected)."""
    code = textwrap.dedent(
        f"""
        import hashlib, hmac, json, socket
        def seal(key, node, seq, body):
            canon = json.dumps([{run_id!r}, node, seq, body], sort_keys=True, separators=(",", ":")).encode()
            mac = hmac.new(key, canon, hashlib.sha256).hexdigest()
            message = {{"v": 1, "run": {run_id!r}, "node": node, "seq": seq, "body": body, "mac": mac}}
            return json.dumps(message).encode()
        failed = {{"state": "cleaning", "finished": True, "outcome": "failed", "rc": 1, "reason": "forged"}}
        node = {standin_cluster.nodes[index]["mgmt_ip"]!r}
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(1.0)
        for data in (seal(bytes(32), node, 10**9, failed), seal(bytes.fromhex({secret!r}), node, 1, failed),
                     b"not json", b"x" * 9000):
            sock.sendto(data, ({head!r}, {port}))
            try:
                print("answered", sock.recv(9000)[:60])
            except socket.timeout:
                print("no answer")
        """
    )
    return standin_cluster.node_exec(index, "python3", "-c", code)


def test_forged_replayed_and_junk_messages_change_nothing_and_the_secret_is_written_nowhere(standin_cluster, tmp_path):
    secret = os.urandom(32).hex()
    run_id = "watch-" + uuid.uuid4().hex[:6]
    head = standin_cluster.nodes[0]
    proc, results, out = standin_cluster.start(
        tmp_path,
        run_id,
        "-vvv",
        environment={"AORTA_RUN_SECRET": secret},
        aorta_training_overrides={"training.max_steps": 600},  # some 30 s of training
    )
    standin_cluster.wait_until_training(range(len(standin_cluster.nodes)), run_id, proc, out)
    (port,) = udp_ports_bound_on(standin_cluster, 0, head["vpc_ip"])
    said = send_datagrams(standin_cluster, 1, secret, run_id, head["vpc_ip"], port)
    assert said.split("\n").count("no answer") == 4, said
    assert proc.wait(timeout=600) == 0, out.read_text()[-3000:]

    run = json.loads((results / "run.json").read_text())
    assert run["status"] == "COMPLETED", run["message"]
    view = json.loads(standin_cluster.node_exec(0, "cat", f"{standin_cluster.status_dir}/aggregates/{run_id}.json"))
    assert view["stop"] is None and view["silent"] == {} and view["settled"] is True
    refused = view["refused"]
    assert refused["unauthenticated"] == 1 and refused["replay"] == 1, refused
    assert refused["not_json"] == 1 and refused["oversized"] == 1, refused
    assert all(n["finished"] and n["outcome"] == "ok" for n in view["nodes"].values()), view["nodes"]

    # Nowhere on the controller (the -vvv console, run.json, logs, traces) nor on any node.
    assert secret not in out.read_text()
    written = [p for p in results.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert written == []
    for i in range(len(standin_cluster.nodes)):
        found = standin_cluster.node_exec(
            i, "grep", "-rl", secret, standin_cluster.status_dir, AORTA_PATH, "/root/.ansible_async", check=False
        )
        assert found == "", (i, found)
