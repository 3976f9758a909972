# SPDX-License-Identifier: GPL-3.0-or-later
"""Light stand-in cluster for scale: many nodes at a few MB each, for benchmarks/bench_scale.py.

Each node is a container of the stand-in node image running only sshd (no dockerd of its own):
its docker CLI talks to the one engine of this machine through the mounted socket, and each
node's workload container joins that node's network namespace (``--network container:<node>``),
so it has the node's management and fabric addresses as on the full stand-in. The workload is
the light STAND-IN in tests/standin/light (no torch): it keeps Aorta's command line and
rendezvous over TCP on the head's fabric address.

Differences from the full stand-in, and why they do not matter for what is measured here: the
management network is one bridge for all nodes (nodes could reach each other's SSH address), and
``docker ps`` on any node lists every node's containers (the collection filters by run and rank).

    python3 tests/standin/scale.py up --nodes 64   # writes build/scale/{cluster.json,vars.yml,host_vars}
    python3 tests/standin/scale.py down
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import standin  # noqa: E402  (beside this file)

OUT = standin.REPO / "build" / "scale"
LABEL = "aorta.standin.scale=1"
PREFIX = "aorta-scale"
MGMT, FABRIC = f"{PREFIX}-mgmt", f"{PREFIX}-fabric"
SSHD = "mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh && ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -D -e"


def node_name(index: int) -> str:
    return f"{PREFIX}-n{index}"


def down() -> None:
    # The nodes' workload containers (started by the nodes on this engine) first: each shares its
    # node's network namespace and has no endpoint of its own, so they may go in one call. The
    # nodes have one endpoint on each network: they go one at a time (standin.remove_one_by_one
    # says why: removed 64 at once, the engine's endpoint count could go stale).
    workloads = standin.sh("docker", "ps", "-aq", "--filter", "label=aorta.cluster.run").split()
    if workloads:
        standin.sh("docker", "rm", "-f", "-v", *workloads)
    standin.remove_one_by_one(standin.sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split())
    for net in standin.sh("docker", "network", "ls", "-q", "--filter", f"label={LABEL}").split():
        gone = subprocess.run(["docker", "network", "rm", net], capture_output=True, text=True, check=False)
        if gone.returncode != 0:
            # Forcing a disconnect by every node's name did not clear it when it was seen (2026-12-03).
            raise standin.StandinError(
                f"scale down: docker network rm {net}: {gone.stderr.strip()}; with no container attached this is "
                "the engine's stale endpoint count (see standin.remove_one_by_one): only a dockerd restart clears it"
            )
    shutil.rmtree(OUT, ignore_errors=True)
    standin.log("scale down: nothing left")


def start_node(index: int, image: str, pubkey: bytes) -> dict:
    name = node_name(index)
    # The same path inside the node and on this machine: the shared engine resolves bind mounts here.
    aorta = OUT / "nodes" / name / "aorta"
    shutil.copytree(HERE / "light", aorta)
    standin.sh(
        "docker", "run", "-d", "--name", name, "--hostname", name, "--label", LABEL, "--network", MGMT,
        "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{aorta}:{aorta}",
        "--entrypoint", "sh", image, "-c", SSHD,
    )  # fmt: skip
    standin.sh("docker", "network", "connect", FABRIC, name)
    standin.sh("docker", "exec", "-i", name, "sh", "-c", "cat > /root/.ssh/authorized_keys", input=pubkey)
    mgmt, fabric = standin.address(name, MGMT), standin.address(name, FABRIC)
    return {"container": name, "mgmt_ip": mgmt, "vpc_ip": fabric, "aorta_path": str(aorta)}


def up(nodes: int) -> dict:
    standin.ensure_engine()
    images = standin.build_images()
    down()
    t0 = time.monotonic()
    OUT.mkdir(parents=True)
    key = OUT / "id_ed25519"
    standin.sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "aorta-scale", "-f", str(key))
    pubkey = key.with_suffix(".pub").read_bytes()
    standin.sh("docker", "network", "create", "--label", LABEL, MGMT)
    standin.sh("docker", "network", "create", "--internal", "--label", LABEL, FABRIC)
    with ThreadPoolExecutor(max_workers=8) as pool:
        table = list(pool.map(lambda i: start_node(i, images["NODE_IMAGE"], pubkey), range(nodes)))
    with ThreadPoolExecutor(max_workers=8) as pool:
        known = list(pool.map(lambda row: standin.keyscan(row["mgmt_ip"]), table))
    (OUT / "known_hosts").write_text("".join(known))
    node_dict = {row["mgmt_ip"]: {"bmc_ip": "NA", "vpc_ip": row["vpc_ip"]} for row in table}
    cluster = {
        "_comment": "Generated by tests/standin/scale.py: a light STAND-IN cluster, not real GPU nodes.",
        "username": "root",
        "priv_key_file": str(key),
        "head_node_dict": {"mgmt_ip": table[0]["mgmt_ip"]},
        "env_vars": {},
        "node_dict": node_dict,
    }
    (OUT / "cluster.json").write_text(json.dumps(cluster, indent=2) + "\n")
    # Per node: its own checkout path, container name and network namespace on the shared engine.
    (OUT / "host_vars").mkdir()
    for row in table:
        (OUT / "host_vars" / f"{row['mgmt_ip']}.yml").write_text(
            f"aorta_path: {row['aorta_path']}\n"
            f"aorta_docker_container_name: {row['container']}-job\n"
            f"aorta_docker_network_mode: container:{row['container']}\n"
        )
    (OUT / "vars.yml").write_text(
        f"""---
# Generated by tests/standin/scale.py: only what differs from a real cluster.
ansible_ssh_common_args: >-
  -o UserKnownHostsFile={OUT / "known_hosts"} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes
ansible_python_interpreter: /usr/bin/python3
aorta_require_gpu: false
aorta_results_root: {standin.REPO / "build" / "results"}
aorta_base_config: config/light.yaml
aorta_docker_image: {images["NODE_IMAGE"]}
aorta_torchrun: /mnt/torchrun
aorta_master_launch_mode: torchrun
aorta_nproc_per_node: 1
aorta_docker_ulimits: []
aorta_docker_shm_size: 64m
aorta_min_free_gb: 1
aorta_poll_seconds: 2
aorta_timeout_seconds: 300
aorta_collect_traces: false
# The fabric sweep in about a second (users get the default 10 s).
aorta_fabric_sweep_seconds: 1
"""
    )
    state = {"nodes": table, **images}
    (OUT / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    standin.log(f"scale up: {nodes} light nodes in {time.monotonic() - t0:.0f}s: {OUT / 'cluster.json'}")
    return state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up")
    up_parser.add_argument("--nodes", type=int, default=64)
    sub.add_parser("down")
    args = parser.parse_args(argv)
    try:
        up(args.nodes) if args.command == "up" else down()
    except (standin.StandinError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"scale: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
