# SPDX-License-Identifier: GPL-3.0-or-later
"""Reproduce the engine's stale endpoint count that once failed bench_scale's teardown.

Per round: two networks, N sleeping containers of the stand-in node image on both (started 8 at a
time, as scale.up() does), then all of them removed, in one ``docker rm -f`` (``together``) or one
container per call (``one-by-one``, what standin.remove_one_by_one does), then both networks
removed. A round fails when ``docker network rm`` answers "has active endpoints" with no container
attached; the script stops there and exits 1, and only a dockerd restart clears that network.
Keep both cores busy while it runs (bench_scale's teardown follows a 64-node run on them):

    for i in 1 2; do timeout 900 python3 -c 'while 1: pass' & done
    python3 tests/standin/endpoint_race.py --nodes 96 --rounds 6 together

Not part of any test or benchmark: it leaves the engine needing a restart when the race hits.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import standin

LABEL = "aorta.standin.endpoint-race=1"
NETWORKS = ("aorta-race-a", "aorta-race-b")


def sh(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


def start(image: str, index: int) -> str:
    name = f"aorta-race-n{index}"
    standin.sh("docker", "run", "-d", "--name", name, "--label", LABEL, "--network", NETWORKS[0],
               "--entrypoint", "sleep", image, "100000")  # fmt: skip
    standin.sh("docker", "network", "connect", NETWORKS[1], name)
    return name


def one_round(image: str, nodes: int, removal: str) -> tuple[str | None, float]:
    standin.sh("docker", "network", "create", "--label", LABEL, NETWORKS[0])
    standin.sh("docker", "network", "create", "--internal", "--label", LABEL, NETWORKS[1])
    with ThreadPoolExecutor(max_workers=8) as pool:
        names = list(pool.map(lambda i: start(image, i), range(nodes)))
    t0 = time.monotonic()
    if removal == "together":
        standin.sh("docker", "rm", "-f", *names)
    else:
        standin.remove_one_by_one(names)
    took = time.monotonic() - t0
    for net in NETWORKS:
        gone = sh("docker", "network", "rm", net)
        if gone.returncode != 0:
            return f"{net}: {gone.stderr.strip()}", took
    return None, took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("removal", choices=["together", "one-by-one"])
    args = parser.parse_args(argv)
    image = standin.build_images()["NODE_IMAGE"]
    for number in range(args.rounds):
        stale, took = one_round(image, args.nodes, args.removal)
        print(f"round {number} {args.removal}: removed in {took:.1f}s; {stale or 'both networks removed'}", flush=True)
        if stale:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
