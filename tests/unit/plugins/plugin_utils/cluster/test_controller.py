# SPDX-License-Identifier: GPL-3.0-or-later
"""The lease owner names the controller's user, host and ansible-playbook process."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import (
    controller_identity,
    owner_is_gone,
)


def test_identity_names_user_host_and_parent_process():
    assert controller_identity() == f"{getpass.getuser()}@{socket.gethostname()} (ansible-playbook pid {os.getppid()})"


def test_owner_is_gone_only_for_a_dead_ansible_process_of_this_controller():
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert owner_is_gone(f"root@{host} (ansible-playbook pid {dead.pid})")
    # A live process that is not ansible-playbook: its pid was reused, the owner is gone.
    assert owner_is_gone(f"root@{host} (ansible-playbook pid {os.getpid()})") is ("ansible" not in " ".join(sys.argv))
    assert not owner_is_gone(f"root@another-controller (ansible-playbook pid {dead.pid})")
    assert not owner_is_gone("someone")
