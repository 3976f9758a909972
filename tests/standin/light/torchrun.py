# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN for torchrun on the light scale cluster (no torch): same command line, same
environment for the workers (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), same exit
code rule (the first failing worker's, else 0), SIGTERM passed on to the workers."""

import argparse
import os
import signal
import subprocess
import sys

parser = argparse.ArgumentParser()
for name in ("nnodes", "node_rank", "nproc_per_node", "master_port"):
    parser.add_argument(f"--{name}", type=int, required=True)
parser.add_argument("--master_addr", required=True)
args, rest = parser.parse_known_args()
rest = [a for a in rest if not a.startswith("--rdzv") and not a.startswith("--max_restarts")]
world = args.nnodes * args.nproc_per_node
workers = []
for local in range(args.nproc_per_node):
    env = dict(
        os.environ,
        RANK=str(args.node_rank * args.nproc_per_node + local),
        LOCAL_RANK=str(local),
        WORLD_SIZE=str(world),
        MASTER_ADDR=args.master_addr,
        MASTER_PORT=str(args.master_port),
    )
    workers.append(subprocess.Popen([sys.executable, *rest], env=env))


def forward(signum, _frame):
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signum)


signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
codes = [worker.wait() for worker in workers]
sys.exit(next((c for c in codes if c), 0))
