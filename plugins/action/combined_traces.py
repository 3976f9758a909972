# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""combined_traces in the controller's own Python (documented in plugins/modules/combined_traces.py).

Run as a module on localhost it would start a module process with the hosts' ansible_python_interpreter,
which a cluster file's vars often set for every host, implicit localhost included: a path the
controller may not have. The tree is the controller's; so is the Python that writes it.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.aorta.cluster.plugins.action.trace_parse import ActionModule as ControllerTaskAction
from ansible_collections.aorta.cluster.plugins.module_utils._combined import ARGUMENT_SPEC, write


class ActionModule(ControllerTaskAction):
    ARGUMENT_SPEC: dict[str, Any] = ARGUMENT_SPEC
    TASK = staticmethod(write)
