# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who runs this playbook, as another run's refusal message names it (controller side).

Private to this collection.
"""

from __future__ import annotations

import getpass
import os
import re
import socket

_OWNER = re.compile(r"^(?P<user>[^@]*)@(?P<host>\S+) \(ansible-playbook pid (?P<pid>\d+)\)$")


def controller_identity() -> str:
    """``user@host (ansible-playbook pid N)``: enough for an operator to find the run's owner.

    Called in a worker process, whose parent is the ansible-playbook process itself.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (ansible-playbook pid {os.getppid()})"


def owner_is_gone(owner: str) -> bool:
    """True when ``owner`` names an ansible-playbook process on THIS controller that no longer runs.

    Only then can a lease taken during setup (no supervisor yet) be known dead before it expires:
    a lease owned by another controller is left to its expiry.
    """
    match = _OWNER.match(owner or "")
    if not match or match.group("host") != socket.gethostname():
        return False
    try:
        with open(f"/proc/{int(match.group('pid'))}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return True
    return b"ansible" not in cmdline
