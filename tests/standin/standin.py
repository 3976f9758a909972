# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in cluster: Docker-in-Docker nodes reached over real SSH, for tests, molecule and the demo.

Each node is a container with its own hostname, sshd and dockerd, and two addresses: a management
address on a bridge of its own (what SSH uses, the node_dict key) and a fabric address on one
network shared by all nodes (vpc_ip). Nodes cannot reach each other's management addresses, as
on a real cluster where training traffic must use the fabric.

    python3 tests/standin/standin.py up [--nodes N]     # writes build/standin/{cluster.json,vars.yml,...}
    python3 tests/standin/standin.py down

Several stand-in clusters can run side by side on one Docker engine, one per instance:
``AORTA_STANDIN_INSTANCE=gw0`` names every container, network, label and path of its cluster
after the instance (``aorta-standin-gw0-n0``, ``build/standin-gw0/``); unset, the names are the
plain ones users and docs know (``aorta-standin-n0``, ``build/standin/``). Each pytest-xdist
worker of the integration tests runs its own instance (tests/integration/conftest.py). Instances
share only the image cache, whose builds take a lock.

Only the controller, these nodes and loopback exchange traffic.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
INSTANCE = os.environ.get("AORTA_STANDIN_INSTANCE", "")
if not re.fullmatch(r"[a-z0-9]{0,12}", INSTANCE) or INSTANCE == "1":  # "1": the plain instance's label
    raise SystemExit(f"AORTA_STANDIN_INSTANCE={INSTANCE!r}: at most 12 lowercase letters and digits, not 1")
_SUFFIX = f"-{INSTANCE}" if INSTANCE else ""
OUT = REPO / "build" / f"standin{_SUFFIX}"
RESULTS = REPO / "build" / f"results{_SUFFIX}"  # the stand-in's aorta_results_root
CACHE = Path(os.environ.get("AORTA_STANDIN_CACHE", REPO / "build" / "standin-cache"))
LABEL = f"aorta.standin={INSTANCE or '1'}"  # every instance's label key is aorta.standin
PREFIX = f"aorta-standin{_SUFFIX}"
FABRIC = f"{PREFIX}-fabric"
AORTA_PATH = "/root/aorta"  # the stand-in "Aorta checkout" on every node (aorta_path)

# What a node needs to run its own dockerd where `--privileged` is refused (the sandbox's bounding
# set lacks CAP_SYS_RESOURCE): every other capability, no LSM confinement, all devices, rw cgroups.
DIND_FLAGS = [
    "--cap-add",
    "ALL",
    "--cap-drop",
    "SYS_RESOURCE",
    "--security-opt",
    "apparmor=unconfined",
    "--security-opt",
    "seccomp=unconfined",
    "--device-cgroup-rule",
    "a *:* rwm",
    "-v",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs",
    "/run",
]


class StandinError(RuntimeError):
    pass


def sh(*argv: str, check: bool = True, input: bytes | None = None, timeout: float = 600) -> str:
    result = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise StandinError(f"{' '.join(argv[:4])}... failed ({result.returncode}): {result.stderr.decode()[-2000:]}")
    return result.stdout.decode()


def log(message: str) -> None:
    print(f"[standin] {message}", flush=True)


def ensure_engine() -> None:
    subprocess.run([str(REPO / "tools" / "install-host-deps.sh")], check=True)


@contextlib.contextmanager
def cache_lock():
    """The image cache to this process alone: instances starting side by side build the images
    and write the workload archive once, not over each other."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build_images() -> dict[str, str]:
    with cache_lock():
        out = sh(str(HERE / "build_images.sh"), timeout=1800)
    last = out.strip().splitlines()[-1]
    return dict(item.split("=", 1) for item in last.split())


def image_archive(image: str) -> Path:
    """The workload image as a `docker save` archive (air-gapped path), cached by image id."""
    image_id = sh("docker", "image", "inspect", "-f", "{{.Id}}", image).strip().split(":")[-1][:12]
    path = CACHE / f"workload-{image_id}.tar"
    with cache_lock():
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            sh("docker", "save", "-o", str(tmp), image)
            tmp.rename(path)
    return path


def node_name(index: int) -> str:
    return f"{PREFIX}-n{index}"


def address(container: str, network: str) -> str:
    fmt = "{{(index .NetworkSettings.Networks %s).IPAddress}}".replace("%s", json.dumps(network))
    return sh("docker", "inspect", "-f", fmt, container).strip()


def interface_of(container: str, ip: str) -> str:
    out = sh("docker", "exec", container, "ip", "-o", "-4", "addr", "show")
    for line in out.splitlines():
        fields = line.split()
        if fields[3].split("/")[0] == ip:
            return fields[1].split("@")[0]
    raise StandinError(f"{container}: no interface holds {ip}")


def wait_for(what: str, probe, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(1)
    raise StandinError(f"timed out waiting for {what}")


def succeeds(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False, timeout=60).returncode == 0


def remove_one_by_one(containers: list) -> None:
    """Remove containers one ``docker rm`` at a time, never several in one call.

    ``docker rm -f a b c`` removes them concurrently, and Docker 20.10's libnetwork counts each
    network's endpoints in a store that concurrent endpoint deletions on one network can leave
    too high: the network then cannot be removed ("has active endpoints", none attached) until
    dockerd restarts (moby#42119; moby dropped that count in v28.1). Measured on 2026-12-04 on
    this machine's engine, 96 or 64 sleeping containers on two networks, both cores kept busy:
    removed in one call, the count went stale in 5 of 8 rounds; one at a time, in none of 11
    (tests/standin/endpoint_race.py; benchmarks/RESULTS.md). A container sharing another's namespace
    has no endpoint of its own.
    """
    for container in containers:
        sh("docker", "rm", "-f", "-v", container)


def down() -> None:
    """Remove every container, network and node directory of the stand-in cluster; keep the image cache."""
    remove_one_by_one(sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split())
    nets = sh("docker", "network", "ls", "-q", "--filter", f"label={LABEL}").split()
    if nets:
        sh("docker", "network", "rm", *nets)
    # Node docker roots hold root-owned files from the inner daemons.
    shutil.rmtree(OUT, ignore_errors=True)
    log("down: no stand-in container, network or node directory left")


def start_node(index: int, node_image: str) -> str:
    name = node_name(index)
    mgmt = f"{PREFIX}-mgmt{index}"
    docker_root = OUT / "nodes" / name / "docker"
    docker_root.mkdir(parents=True, exist_ok=True)
    sh("docker", "network", "create", "--label", LABEL, mgmt)
    sh(
        "docker",
        "run",
        "-d",
        "--name",
        name,
        "--hostname",
        name,
        "--label",
        LABEL,
        "--network",
        mgmt,
        *DIND_FLAGS,
        "-v",
        f"{docker_root}:/var/lib/docker",
        node_image,
    )
    sh("docker", "network", "connect", FABRIC, name)
    return name


def prepare_node(name: str, pubkey: bytes, archive: Path, workload_image: str) -> None:
    install_key = "cat > /root/.ssh/authorized_keys; chmod 600 /root/.ssh/authorized_keys"
    sh("docker", "exec", "-i", name, "sh", "-c", install_key, input=pubkey)
    wait_for_dockerd(name)
    have = succeeds("docker", "exec", name, "docker", "image", "inspect", workload_image)
    if not have:
        with open(archive, "rb") as handle:
            subprocess.run(
                ["docker", "exec", "-i", name, "docker", "load", "-q"],
                stdin=handle,
                check=True,
                capture_output=True,
                timeout=900,
            )
    sh("docker", "exec", name, "mkdir", "-p", AORTA_PATH)
    sh("docker", "cp", f"{HERE / 'workload'}/.", f"{name}:{AORTA_PATH}/")
    # The STAND-IN amd-smi and rocm-smi (tests/standin/gpu): eight fake healthy GPUs until a test
    # turns a knob with gpu_knobs().
    for tool in ("amd-smi", "rocm-smi", "gpu_tool.py"):
        sh("docker", "cp", str(HERE / "gpu" / tool), f"{name}:/usr/local/bin/{tool}")
    gpu_knobs(name, {})


def wait_for_dockerd(name: str) -> None:
    wait_for(f"dockerd on {name}", lambda: succeeds("docker", "exec", name, "docker", "info"))


def restart_node(name: str, mgmt_ip: str) -> None:
    """Start a stopped or killed node again and wait until its dockerd and sshd answer (its host
    key is the one known_hosts holds: it lives in the container's own filesystem)."""
    sh("docker", "start", name)
    wait_for_dockerd(name)
    keyscan(mgmt_ip)


def gpu_knobs(name: str, knobs: dict) -> None:
    """Set the knobs of node ``name``'s STAND-IN GPU tool (see tests/standin/gpu/amd-smi): gpus,
    partitions, driver, rocm, processes, ecc_uncorrectable, ecc_correctable, delay_s."""
    write = "mkdir -p /etc/aorta-standin && cat > /etc/aorta-standin/gpu.json"
    sh("docker", "exec", "-i", name, "sh", "-c", write, input=json.dumps(knobs).encode())


def throttle(name: str, rate: str = "") -> str:
    """Limit node ``name``'s fabric egress to ``rate`` (tc's units: ``200mbit``, ``1gbit``) with a
    token bucket (tbf: this machine's kernel has tbf and htb, not netem, so the egress rate only, no
    added delay); an empty ``rate`` takes the limit away. The slow link a real cluster gets from a
    port that came up slower or a NIC throttled by pause frames. Returns the interface."""
    iface = interface_of(name, address(name, FABRIC))
    sh("docker", "exec", name, "tc", "qdisc", "del", "dev", iface, "root", check=False)
    if rate:
        # The bucket holds 10 ms of the rate (at least 64 KB: one large send fits, or tbf drops it).
        burst = max(64 * 1024, int(_bits(rate) / 8 / 100))
        sh("docker", "exec", name, "tc", "qdisc", "add", "dev", iface, "root", "tbf", "rate", rate,
           "burst", str(burst), "latency", "200ms")  # fmt: skip
    return iface


def slow(name: str, factor: float = 1.0) -> str:
    """Make node ``name``'s compute ``factor`` times slower for every run on it (the stand-in
    workload reads standin-node.json in the node's Aorta checkout, which the launch mounts as the
    workload's working directory); 1 takes the fault away. A slow node, not a slow rank: it stays with
    the machine whatever rank a run gives it. Returns the file's path on the node."""
    if factor <= 0:
        raise StandinError(f"slow: {factor!r} is not a factor above 0 (1.6: 60 % longer)")
    path = f"{AORTA_PATH}/standin-node.json"
    if factor == 1.0:
        sh("docker", "exec", name, "rm", "-f", path)
    else:
        write = f"cat > {path}"
        sh("docker", "exec", "-i", name, "sh", "-c", write, input=json.dumps({"compute_factor": factor}).encode())
    return path


def _bits(rate: str) -> float:
    """tc's rate (``200mbit``, ``1gbit``, ``500kbit``) in bits per second."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * factor
    raise StandinError(f"throttle: {rate!r} is not a rate tc reads (e.g. 200mbit, 1gbit)")


def add_node(index: int) -> dict:
    """One more node beside the running stand-in cluster, for a test that needs more nodes than the
    session's; it is not in cluster.json (the test writes its own). ``{container, mgmt_ip, vpc_ip,
    fabric_if}``. remove_node() takes it away."""
    state = json.loads((OUT / "state.json").read_text())
    key = OUT / "id_ed25519"
    name = start_node(index, state["NODE_IMAGE"])
    prepare_node(
        name, key.with_suffix(".pub").read_bytes(), image_archive(state["WORKLOAD_IMAGE"]), state["WORKLOAD_IMAGE"]
    )
    mgmt_ip, fabric_ip = address(name, f"{PREFIX}-mgmt{index}"), address(name, FABRIC)
    with open(OUT / "known_hosts", "a", encoding="utf-8") as handle:
        handle.write(keyscan(mgmt_ip))
    with open(OUT / "ssh_config", "a", encoding="utf-8") as handle:
        handle.write(
            f"Host {mgmt_ip}\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {OUT / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
        )
    log(f"added node {name}: mgmt {mgmt_ip} fabric {fabric_ip}")
    return {"container": name, "mgmt_ip": mgmt_ip, "vpc_ip": fabric_ip, "fabric_if": interface_of(name, fabric_ip)}


def remove_node(index: int) -> None:
    """Take away a node add_node() started (its container and management network)."""
    sh("docker", "rm", "-f", "-v", node_name(index), check=False)
    sh("docker", "network", "rm", f"{PREFIX}-mgmt{index}", check=False)
    shutil.rmtree(OUT / "nodes" / node_name(index), ignore_errors=True)


def keyscan(ip: str) -> str:
    def scanned():
        result = subprocess.run(["ssh-keyscan", "-T", "5", "-t", "ed25519", ip], capture_output=True, check=False)
        scanned.text = result.stdout.decode()
        return bool(scanned.text.strip())

    wait_for(f"sshd on {ip}", scanned, timeout=60)
    return scanned.text


def up(nodes: int = 2) -> dict:
    if nodes < 1:
        raise StandinError("--nodes must be at least 1")
    ensure_engine()
    t0 = time.monotonic()
    images = build_images()
    log(f"images ready in {time.monotonic() - t0:.0f}s: {images['NODE_IMAGE']}, {images['WORKLOAD_IMAGE']}")
    archive = image_archive(images["WORKLOAD_IMAGE"])
    down()
    OUT.mkdir(parents=True, exist_ok=True)

    key = OUT / "id_ed25519"
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "aorta-standin", "-f", str(key))
    pubkey = key.with_suffix(".pub").read_bytes()
    # --internal: the fabric carries node-to-node traffic only, nothing leaves it.
    sh("docker", "network", "create", "--internal", "--label", LABEL, FABRIC)

    names = [start_node(i, images["NODE_IMAGE"]) for i in range(nodes)]
    with ThreadPoolExecutor(max_workers=nodes) as pool:
        list(pool.map(lambda n: prepare_node(n, pubkey, archive, images["WORKLOAD_IMAGE"]), names))

    node_dict, known_hosts, table = {}, [], []
    for name in names:
        mgmt_ip = address(name, f"{PREFIX}-mgmt{names.index(name)}")
        fabric_ip = address(name, FABRIC)
        if mgmt_ip == fabric_ip:
            raise StandinError(f"{name}: management and fabric address are the same")
        node_dict[mgmt_ip] = {"bmc_ip": "NA", "vpc_ip": fabric_ip, "standin_container": name}
        known_hosts.append(keyscan(mgmt_ip))
        table.append((name, mgmt_ip, fabric_ip, interface_of(name, fabric_ip)))
    (OUT / "known_hosts").write_text("".join(known_hosts))
    # For plain ssh and pytest-testinfra (molecule verify): same key, same host-key check.
    (OUT / "ssh_config").write_text(
        "".join(
            f"Host {ip}\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {OUT / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            for ip in node_dict
        )
    )

    head = next(iter(node_dict))
    cluster = {
        "_comment": "Generated by tests/standin/standin.py: a STAND-IN cluster, not real GPU nodes.",
        "username": "root",
        "priv_key_file": str(key),
        "head_node_dict": {"mgmt_ip": head},
        "env_vars": {},
        "node_dict": node_dict,
    }
    (OUT / "cluster.json").write_text(json.dumps(cluster, indent=2) + "\n")
    vars_yml = f"""---
# Generated by tests/standin/standin.py: only what differs from a real cluster.
ansible_ssh_common_args: >-
  -o UserKnownHostsFile={OUT / "known_hosts"} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes
ansible_python_interpreter: /usr/bin/python3
aorta_require_gpu: false
aorta_path: {AORTA_PATH}
aorta_results_root: {RESULTS}
aorta_base_config: config/standin.yaml
aorta_docker_image: {images["WORKLOAD_IMAGE"]}
aorta_image_archive: {archive}
aorta_gpus_per_node: 2
# Raising rlimits needs CAP_SYS_RESOURCE, which the stand-in nodes cannot have.
aorta_docker_ulimits: []
aorta_min_free_gb: 1
aorta_poll_seconds: 2
aorta_timeout_seconds: 300
# The fabric sweep in about a second (users get the default 10 s).
aorta_fabric_sweep_seconds: 1
"""
    (OUT / "vars.yml").write_text(vars_yml)
    # To rehearse with the installed collection from any directory (docs/quickstart.md): the same
    # values, the results under the directory ansible-playbook runs from, and an inventory source
    # that names the plugin (no ansible.cfg of the checkout needed).
    here = f"aorta_results_root: {RESULTS}"
    rehearse = vars_yml.replace(here, "aorta_results_root: aorta_results")
    (OUT / "rehearse.yml").write_text(rehearse)
    (OUT / "cluster.aorta.yml").write_text("plugin: aorta.cluster.cluster_json\npath: cluster.json\n")
    # The same values as group vars beside the cluster file: Ansible loads them for any play whose
    # inventory is this cluster.json (molecule's converge), no -e needed.
    (OUT / "group_vars").mkdir(exist_ok=True)
    (OUT / "group_vars" / "all.yml").write_text(vars_yml)
    state = {"nodes": [dict(zip(("container", "mgmt_ip", "vpc_ip", "fabric_if"), row)) for row in table], **images}
    (OUT / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    for row in table:
        log("node {:18} mgmt {:15} fabric {:15} ({})".format(*row))
    log(f"up in {time.monotonic() - t0:.0f}s: {OUT / 'cluster.json'} and {OUT / 'vars.yml'}")
    return state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up", help="start N stand-in nodes (replaces a running stand-in cluster)")
    up_parser.add_argument("--nodes", type=int, default=2)
    sub.add_parser("down", help="remove the stand-in cluster (keeps the image cache)")
    link = sub.add_parser("throttle", help="limit one node's fabric egress (a slow link), or lift the limit")
    link.add_argument("--node", type=int, required=True, help="the node's index (0: the head)")
    link.add_argument("--rate", default="", help="tc's rate, e.g. 200mbit; empty lifts the limit")
    compute = sub.add_parser("slow", help="make one node's compute slower for every run (a slow node), or undo it")
    compute.add_argument("--node", type=int, required=True, help="the node's index (0: the head)")
    compute.add_argument("--factor", type=float, default=1.0, help="e.g. 1.6 (60 %% longer); 1 undoes it")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.nodes)
        elif args.command == "slow":
            path = slow(node_name(args.node), args.factor)
            log(f"{node_name(args.node)}: compute x{args.factor:g} ({path})")
        elif args.command == "throttle":
            iface = throttle(node_name(args.node), args.rate)
            log(f"{node_name(args.node)}: fabric {iface} egress {args.rate or 'unlimited'}")
        else:
            down()
    except (StandinError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"standin: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
