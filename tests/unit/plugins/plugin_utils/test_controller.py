# SPDX-License-Identifier: GPL-3.0-or-later
"""The lease owner names the controller's user, host and ansible-playbook process."""

from __future__ import annotations

import getpass
import os
import socket

from ansible_collections.aorta.cluster.plugins.plugin_utils._controller import controller_identity


def test_identity_names_user_host_and_parent_process():
    assert controller_identity() == f"{getpass.getuser()}@{socket.gethostname()} (ansible-playbook pid {os.getppid()})"
