#!/bin/sh
# PID 1 of a stand-in node: its own sshd and its own dockerd, like a real GPU node's host.
set -e
mkdir -p /run/sshd /root/.ssh /var/log
chmod 700 /root/.ssh
[ -f /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null
/usr/sbin/sshd -E /var/log/sshd.log
# overlay2 on the bind-mounted per-node /var/lib/docker; a per-node cgroup parent keeps nodes apart.
dockerd --storage-driver=overlay2 --cgroup-parent="/standin-$(hostname)" >/var/log/dockerd.log 2>&1 &
exec sleep infinity
