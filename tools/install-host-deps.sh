#!/usr/bin/env bash
# Install and start what the controller side and the stand-in cluster need on a Debian host:
# a Docker engine (the machines ship only the client), debootstrap for registry-free images,
# ssh for the nodes, rsync for bench_collect's baseline. Safe to run twice; says what to install when it cannot.
set -euo pipefail

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v rsync >/dev/null || need_pkgs+=(rsync)
command -v ssh >/dev/null || need_pkgs+=(openssh-client)
command -v ssh-keygen >/dev/null || need_pkgs+=(openssh-client)
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v zstd >/dev/null || need_pkgs+=(zstd)
# ansible-test sanity skips its shellcheck test without it.
command -v shellcheck >/dev/null || need_pkgs+=(shellcheck)
# The browser test opens report.html in headless Chromium (and screenshots it, with a font).
command -v chromium >/dev/null || need_pkgs+=(chromium fonts-dejavu-core)

if ((${#need_pkgs[@]})); then
  if [[ $(id -u) -ne 0 || ! -x /usr/bin/apt-get ]]; then
    echo "missing: ${need_pkgs[*]} - install them (Debian: apt-get install -y ${need_pkgs[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "no Docker engine answers and this is not root: start dockerd (or add this user to the docker group)" >&2
    exit 1
  fi
  mkdir -p /var/log
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start: see /var/log/dockerd.log" >&2; exit 1; }
fi
echo "host dependencies ready: $(docker version --format 'docker engine {{.Server.Version}}')"
