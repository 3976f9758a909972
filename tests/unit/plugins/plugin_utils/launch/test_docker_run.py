# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/launch/_docker_run.py: each node's ``docker run`` argv."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._docker_run import docker_run_argv
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError


def test_docker_run_argv_has_everything_rocm_needs_and_no_privileged_by_default():
    argv = docker_run_argv(
        {
            "name": "aorta-r1",
            "image": "rocm/aorta:1",
            "mount_source": "/home/me/aorta",
            "mount_target": "/mnt",
            "labels": {"aorta.cluster.run": "r1"},
            "shm_size": "17G",
            "group_ids": ["44", "109"],
            "devices": ["/dev/kfd", "/dev/dri"],
            "lifetime_seconds": 100,
        }
    )
    text = " ".join(argv)
    assert argv[:5] == ["docker", "run", "-d", "--name", "aorta-r1"]
    assert "--privileged" not in argv
    for part in [
        "--label aorta.cluster.run=r1",
        "--network host",
        "--ipc host",
        "--shm-size 17G",
        "--user root",
        "--group-add 44 --group-add 109",
        "--device /dev/kfd --device /dev/dri",
        "--cap-add SYS_PTRACE",
        "--cap-add IPC_LOCK",
        "--security-opt seccomp=unconfined",
        "--ulimit memlock=-1:-1",
        "--ulimit stack=67108864:67108864",
        "-v /home/me/aorta:/mnt:rw -w /mnt",
    ]:
        assert part in text, part
    assert argv[-3:] == ["rocm/aorta:1", "sleep", "100"]
    assert "--privileged" in docker_run_argv(
        {"name": "n", "image": "i", "mount_source": "/a", "mount_target": "/m", "privileged": True}
    )
    no_limits = docker_run_argv({"name": "n", "image": "i", "mount_source": "/a", "mount_target": "/m", "ulimits": []})
    assert "--ulimit" not in no_limits


@pytest.mark.parametrize(
    "spec,words",
    [
        ({"name": "n"}, "image is required"),
        (
            {"name": "n", "image": "i", "mount_source": "/a", "mount_target": "/m", "group_ids": ["render"]},
            "not numeric",
        ),
    ],
)
def test_docker_run_argv_errors(spec, words):
    with pytest.raises(LaunchError, match=words):
        docker_run_argv(spec)
