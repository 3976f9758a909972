#!/usr/bin/env bash
# Build the stand-in images without any registry: debootstrap a Debian bookworm root filesystem,
# add what each image needs, `docker import` it. Images are tagged by a hash of their inputs, so
# a second run with unchanged inputs builds nothing.
#   aorta-standin-node:<hash>      a cluster node: sshd + its own dockerd
#   aorta-standin-workload:<hash>  the stand-in for the Aorta container: python3 + torch (CPU) + train.py
# Prints "NODE_IMAGE=... WORKLOAD_IMAGE=..." on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${AORTA_STANDIN_CACHE:-$repo/build/standin-cache}
mkdir -p "$cache"

TORCH_VERSION=2.13.0
NODE_PKGS=python3,openssh-server,iproute2,procps,docker.io,ca-certificates,rsync,tar,gzip,zstd,iputils-ping
WORKLOAD_PKGS=python3,python3-pip,python3-yaml,procps,iproute2,ca-certificates

node_hash=$( { echo "$NODE_PKGS"; sed -n '/^build_node()/,/^}/p' "$here/build_images.sh"; cat "$here/node/"*; } | sha256sum | cut -c1-12)
# train.py is not baked in: like real Aorta it lives in aorta_path on each node, bind-mounted.
workload_hash=$( { echo "$WORKLOAD_PKGS $TORCH_VERSION"; sed -n '/^build_workload()/,/^}/p' "$here/build_images.sh"; } | sha256sum | cut -c1-12)
NODE_IMAGE=aorta-standin-node:$node_hash
WORKLOAD_IMAGE=aorta-standin-workload:$workload_hash

have() { docker image inspect "$1" >/dev/null 2>&1; }

debootstrap_into() {  # dir packages
  local dir=$1 pkgs=$2
  rm -rf "$dir"
  # No mirror argument: debootstrap's default is reachable here; no mirror host in the repo.
  debootstrap --variant=minbase --include="$pkgs" bookworm "$dir" >"$dir.log" 2>&1 \
    || { echo "debootstrap failed, see $dir.log" >&2; tail -20 "$dir.log" >&2; return 1; }
  # Keep images small: no apt lists, docs or caches.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
}

build_node() {
  local root=$cache/rootfs-node
  debootstrap_into "$root" "$NODE_PKGS"
  install -m 0755 "$here/node/node-init.sh" "$root/usr/local/sbin/node-init"
  tar -C "$root" -c . | docker import -c 'CMD ["/usr/local/sbin/node-init"]' - "$NODE_IMAGE" >/dev/null
  rm -rf "$root"
}

build_workload() {
  local root=$cache/rootfs-workload wheels=$cache/wheels
  mkdir -p "$wheels"
  # The CPU torch wheel for cp311 lies in pip's find-links; a plain `pip install torch` would pull a
  # multi-GB CUDA build. Fetch it and its dependencies for bookworm's Python 3.11.
  python3 -m pip download -q -d "$wheels" --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
    "torch==$TORCH_VERSION" numpy
  debootstrap_into "$root" "$WORKLOAD_PKGS"
  mkdir -p "$root/tmp/wheels"
  cp "$wheels"/*.whl "$root/tmp/wheels/"
  chroot "$root" python3 -m pip install -q --no-index --find-links /tmp/wheels --break-system-packages \
    "torch==$TORCH_VERSION" numpy
  rm -rf "$root/tmp/wheels" "$root/root/.cache"
  tar -C "$root" -c . | docker import -c 'WORKDIR /mnt' -c 'CMD ["sleep", "infinity"]' - "$WORKLOAD_IMAGE" >/dev/null
  rm -rf "$root"
}

pids=()
if ! have "$NODE_IMAGE"; then build_node & pids+=($!); fi
if ! have "$WORKLOAD_IMAGE"; then build_workload & pids+=($!); fi
for pid in "${pids[@]}"; do wait "$pid"; done
have "$NODE_IMAGE" && have "$WORKLOAD_IMAGE"
echo "NODE_IMAGE=$NODE_IMAGE WORKLOAD_IMAGE=$WORKLOAD_IMAGE"
