#!/usr/bin/env bash
# `make ee`: build the execution environment (EE) image here with ansible-builder v3, without a
# registry or Galaxy.
#   aorta-ee-base:<hash>      Debian trixie (Python 3.13) from debootstrap, imported into docker
#   aorta-cluster-ee:<hash>   execution-environment.yml built on that base (tools/ee_local_definition.py
#                             says which keys differ from the published file, and why)
# Both are tagged by a hash of their inputs: a second run with unchanged inputs builds nothing.
# Prints "EE_IMAGE=aorta-cluster-ee:<hash>" on its last line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bin=${BIN:-$repo/.venv/bin}
cache=$repo/build/ee-cache
work=$repo/build/ee
mkdir -p "$cache" "$work"

BASE_PKGS=python3,python3-pip,python3-venv,openssh-client,zstd,ca-certificates,tar,gzip,procps
# The host's trust store goes into the base: pip inside the build must trust what the host
# trusts (a TLS-inspecting proxy's CA, here); on a machine without one it is Debian's own.
CA_BUNDLE=${EE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

have() { docker image inspect "$1" >/dev/null 2>&1; }

base_hash=$( { echo "$BASE_PKGS"; sed -n '/^build_base()/,/^}/p' "$0"; cat "$CA_BUNDLE"; } | sha256sum | cut -c1-12)
BASE_IMAGE=aorta-ee-base:$base_hash

build_base() {
  local root=$cache/rootfs-ee-base
  rm -rf "$root"
  debootstrap --variant=minbase --include="$BASE_PKGS" trixie "$root" >"$root.log" 2>&1 \
    || { echo "debootstrap failed, see $root.log" >&2; tail -20 "$root.log" >&2; return 1; }
  rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/*
  cp "$CA_BUNDLE" "$root/etc/ssl/certs/ca-certificates.crt"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
  # ansible-builder runs `python3 -m ensurepip --root /`, which Debian disables for the system
  # Python; python3-pip already provides pip, so say so and succeed.
  cat >"$root/usr/lib/python3.13/ensurepip/__main__.py" <<'EOF'
import importlib.util
import sys

if importlib.util.find_spec("pip") is not None:  # aorta-ee-base: pip is Debian's python3-pip
    sys.exit(0)
import ensurepip  # noqa: E402

if __name__ == "__main__":
    sys.exit(ensurepip._main())
EOF
  # ansible-builder speaks dnf to its package manager (`install -y <pkgs>`, `clean all`).
  cat >"$root/usr/local/bin/ee-apt" <<'EOF'
#!/bin/sh
# aorta-ee-base: dnf's words to apt-get, for ansible-builder's scripts.
set -e
export DEBIAN_FRONTEND=noninteractive
case "$1" in
  install)
    shift
    pkgs=""
    for arg in "$@"; do [ "$arg" = "-y" ] || pkgs="$pkgs $arg"; done
    # shellcheck disable=SC2086  # the package list is meant to split
    apt-get install -y -q --no-install-recommends $pkgs ;;
  clean) apt-get clean ;;
  *) exec apt-get "$@" ;;
esac
EOF
  chmod 0755 "$root/usr/local/bin/ee-apt"
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
}

# The collections as tarballs: this checkout's artifact only. aorta.cluster depends on no other
# collection (galaxy.yml), so the EE bundles none: no ansible.posix, community.docker or their
# dependencies to pack.
dist=$work/dist
rm -rf "$dist"
mkdir -p "$dist"
"$bin/ansible-galaxy" collection build --force --output-path "$dist" . >/dev/null

# The EE's inputs: the definitions, the collections' file checksums (not the tarballs' timestamps).
ee_hash=$( {
  echo "$BASE_IMAGE"
  cat execution-environment.yml meta/execution-environment.yml meta/ee-requirements.txt meta/ee-bindep.txt
  cat "$0" tools/ee_local_definition.py
  for t in "$dist"/*.tar.gz; do basename "$t"; tar -xzOf "$t" FILES.json; done
} | sha256sum | cut -c1-12)
EE_IMAGE=aorta-cluster-ee:$ee_hash

if have "$EE_IMAGE"; then
  echo "EE_IMAGE=$EE_IMAGE"
  exit 0
fi
have "$BASE_IMAGE" || build_base

"$bin/python" tools/ee_local_definition.py execution-environment.yml "$dist" "$BASE_IMAGE" "$EE_IMAGE" \
  >"$work/execution-environment.yml"
rm -rf "$work/context"
# The classic builder leaves one untagged image per build stage (BuildKit needs buildx, which
# Debian's docker.io lacks): remove the ones this build made, whether it succeeded or not.
dangling() { docker images -q --filter dangling=true | sort; }
before=$(dangling)
remove_stage_images() {
  local new
  new=$(comm -13 <(echo "$before") <(dangling))
  # shellcheck disable=SC2086  # one id per word
  [ -z "$new" ] || docker rmi $new >/dev/null || true
}
trap remove_stage_images EXIT
"$bin/ansible-builder" build -f "$work/execution-environment.yml" -c "$work/context" \
  --container-runtime docker -t "$EE_IMAGE" -v 2 \
  --build-arg ANSIBLE_GALAXY_CLI_COLLECTION_OPTS=--offline --extra-build-cli-args=--force-rm >"$work/build.log" 2>&1 \
  || { echo "ansible-builder failed, see $work/build.log" >&2; tail -30 "$work/build.log" >&2; exit 1; }
have "$EE_IMAGE"
echo "EE_IMAGE=$EE_IMAGE"
