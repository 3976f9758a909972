# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who runs this playbook, as another run's refusal message names it (controller side).

Private to this collection.
"""

from __future__ import annotations

import getpass
import os
import socket


def controller_identity() -> str:
    """``user@host (ansible-playbook pid N)``: enough for an operator to find the run's owner.

    Called in a worker process, whose parent is the ansible-playbook process itself.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (ansible-playbook pid {os.getppid()})"
