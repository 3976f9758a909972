# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's aorta_* values as one node sees them, read by the node's action plugins (controller side).

Private to this collection. The node actions (node_prepare, node_launch, node_end) read the variables
themselves, in their own worker process, instead of taking them as task arguments: arguments are
templated by ansible-playbook's single main process, once per node and task, and that serial work is
what grows with the node count. Defaults come from the play's role aorta.cluster.defaults
(generated from roles/variables.yml), at role-default precedence like any role's.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

# The one atomic write (node and controller side); its callers here import it from this module too.
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic


class SettingsError(Exception):
    """A variable the node's step needs is not set at all (the play lacks aorta.cluster.defaults)."""


def read(template: Any, task_vars: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``{name: value}`` for ``names``, each templated with ``template(value)``."""
    missing = [name for name in names if name not in task_vars]
    if missing:
        raise SettingsError(
            f"{', '.join(sorted(missing))}: not set; a play that runs the node steps lists the role "
            "aorta.cluster.defaults (aorta_multinode.yml does)"
        )
    return {name: template(task_vars[name]) for name in names}


def in_rank_order(template: Any, hostvars: Mapping[str, Any], nodes: Iterable[str]) -> list[str]:
    """``nodes`` sorted by their ``aorta_node_rank`` (the cluster file's order; the head first)."""
    position = {str(n): index for index, n in enumerate(nodes)}

    def rank(name: str) -> tuple[int, int]:
        value = (hostvars.get(name) or {}).get("aorta_node_rank")
        try:
            return int(template(value)), position[name]
        except (TypeError, ValueError):
            return len(position), position[name]

    return sorted(position, key=rank)


def rank_order(template: Any, task_vars: Mapping[str, Any], nodes: Iterable[str]) -> list[str]:
    """``nodes`` in rank order, as run_start computed it once for the run (``aorta_rank_order`` on
    localhost): every node's step reading every node's variables was N host-variable lookups per node,
    N squared over a step (about 0.6 ms each measured, 64 nodes). Sorted here when it is not there."""
    wanted = [str(n) for n in nodes]
    hostvars = task_vars.get("hostvars") or {}
    kept = ((hostvars.get("localhost") or {}).get("aorta_rank_order") or []) if "localhost" in hostvars else []
    order = [str(n) for n in template(kept)] if kept else []
    if order and sorted(order) == sorted(wanted):
        return order
    return in_rank_order(template, hostvars, wanted)


def plan_dir(results_dir: str) -> str:
    """The controller-side directory where one node's step leaves what the others need (the head's
    port and address): forked workers share no memory. Under the run's results directory; where
    there is none (--check: run_start creates none, and a dry run leaves nothing in the results
    root), under the machine's temporary directory, named after the results directory's path."""
    if os.path.isdir(results_dir):
        return os.path.join(results_dir, ".plan")
    digest = hashlib.sha256(os.path.abspath(results_dir).encode("utf-8")).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"aorta-cluster-plan-{digest}")


def write_json(path: str, data: Mapping[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_text_atomic(path, json.dumps(data))


def read_json_object(path: str) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def wait_json(
    path: str,
    timeout_s: float,
    poll_s: float = 0.2,
    clock=time.monotonic,
    sleep=time.sleep,
    run_id: str | None = None,
) -> dict | None:
    """The JSON at ``path`` once it is there (and, with ``run_id``, written for that run: a results
    directory used again must not hand a worker an earlier run's verdict), or None after ``timeout_s``."""
    give_up = clock() + timeout_s
    while True:
        try:
            with open(path) as handle:
                found = json.load(handle)
            if run_id is None or (isinstance(found, dict) and found.get("run_id") == run_id):
                return found
        except (OSError, ValueError):
            pass
        if clock() >= give_up:
            return None
        sleep(poll_s)


# ssh's keepalive where the user set none: with ssh's ServerAliveCountMax 3, a hung node's master
# gives up after 45 s (the checkout's ansible.cfg has the same).
SERVER_ALIVE_S = 15


def bound_connection(connection: Any, seconds: Any, run_id: str | None = None, fresh: bool = False) -> None:
    """ssh's ConnectTimeout for this node's connection: a node that does not answer is named after
    ``seconds`` (aorta_connect_timeout) instead of hanging the step.

    With ``run_id``, the ssh master is this run's and this ansible-playbook's own (a ControlPath per
    run and process, in the same directory): a master left by an earlier run or command
    (ControlPersist: a stop, then a trace_collect of the same id) to a node that has since hung
    answers the local client at once and then holds every command until ServerAlive gives up,
    which no ConnectTimeout bounds. A ControlPath the user set is left alone.

    Without a ServerAliveInterval of the user's (ansible-core's default ssh_args have none: a run
    outside the checkout's ansible.cfg) ServerAliveInterval=15 is added, as that ansible.cfg has: a
    master whose node hangs mid-play gives up after 45 s instead of holding the play for ever.

    ``fresh``: a master of its own even within the run, for a node the head counted as gone. A node
    that vanished without a word (its address gone, no reset) leaves the run's master, idle since
    the launch, holding the next command until ServerAlive gives up (about 30 s measured in
    bench_scale's killed-node run); a new connection fails within ConnectTimeout instead."""
    options = getattr(connection, "_options", {})
    if "timeout" in options:
        connection.set_option("timeout", int(seconds))
    if run_id and "control_path" in options and not options.get("control_path"):
        who = "-".join(str(options.get(name)) for name in ("host", "port", "remote_user"))
        # The worker's parent: the ansible-playbook process (one master per command, never an earlier one's).
        who += f"-{os.getppid()}" + ("-fresh" if fresh else "")
        digest = hashlib.sha1(f"{who}-{run_id}".encode()).hexdigest()[:10]
        connection.set_option("control_path", "%(directory)s/aorta-" + digest)
    if "ssh_extra_args" in options:
        given = " ".join(str(options.get(name) or "") for name in ("ssh_args", "ssh_common_args", "ssh_extra_args"))
        if "serveralive" not in given.lower():
            extra = str(options.get("ssh_extra_args") or "")
            connection.set_option("ssh_extra_args", f"{extra} -o ServerAliveInterval={SERVER_ALIVE_S}".strip())
