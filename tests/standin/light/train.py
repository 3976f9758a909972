# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN workload for the light scale cluster (no torch, no GPU): Aorta's CLI contract
(--config, --override k=v ...), a rendezvous of every rank over TCP on the head's fabric address
(MASTER_ADDR:MASTER_PORT, the way torch's TCPStore does it), then training.max_steps steps that
each write one line to rank_<rr>_metrics.jsonl, with rank<r>.log as Aorta names them.
"""

import argparse
import datetime as dt
import json
import os
import signal
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--override", nargs="*", default=[])
parser.add_argument("--enable-rocm-metrics", action="store_true")
args = parser.parse_args()
overrides = dict(item.split("=", 1) for item in args.override)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
out = overrides.get("training.output_dir", "artifacts/light")
steps = int(overrides.get("training.max_steps", 3))
step_s = float(overrides.get("standin.step_ms", 50)) / 1000
os.makedirs(out, exist_ok=True)
log = open(os.path.join(out, f"rank{rank}.log"), "a")  # noqa: SIM115 (open for the whole run)


def say(text):
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    log.write(f"{stamp} | {text}\n")
    log.flush()


stop = []
signal.signal(signal.SIGTERM, lambda *_args: stop.append(1))
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
deadline = time.monotonic() + 300
if rank == 0:
    server = socket.create_server(("0.0.0.0", port), reuse_port=False)
    server.settimeout(300)
    peers = [server.accept()[0] for _peer in range(world - 1)]
    for peer in peers:
        peer.sendall(b"go\n")
        peer.close()
    server.close()
else:
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("rendezvous timed out")
            time.sleep(0.2)
    conn.settimeout(max(1.0, deadline - time.monotonic()))  # rank 0 answers once every rank is in
    conn.recv(3)
    conn.close()
say(f"Initialised distributed training rank={rank} world_size={world} (light stand-in)")
with open(os.path.join(out, f"rank_{rank:02d}_metrics.jsonl"), "a") as metrics:
    for step in range(steps):
        if stop:
            break
        time.sleep(step_s)
        metrics.write(json.dumps({"step": step, "rank": rank}) + "\n")
        metrics.flush()
say(f"done | rank={rank} steps={step + 1}")
