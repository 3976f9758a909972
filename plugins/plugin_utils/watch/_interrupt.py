# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ctrl-C, a CI runner's SIGTERM: the first stops the run everywhere and records it; a second leaves.

Private to this collection (controller side). Ansible's task queue manager kills its workers and
raises on SIGINT, so a play cannot go on after it by itself. The lookup aorta.cluster.interrupts,
templated in ansible-playbook's main process once the task queue manager exists (the playbook's
first controller play names its hosts through it), puts ``Interrupts.handle`` in front of Ansible's
own handlers:

- the first SIGINT or SIGTERM writes the stop request (a file whose path every worker inherits in
  AORTA_STOP_REQUEST) and says, once, that the run is stopping; Ansible carries on. The step that is
  running reads the request: before the launch, preflight and the launch refuse (the rescue tears
  down what exists); while training, the head's watch tells the head at its next poll (one command;
  the head's aggregator stops every node: SIGTERM, grace, SIGKILL); while collecting, collection
  carries on. run_record then writes status STOPPED with the reason, the phase and each node's steps.
- a second one prints the command that stops the run later and hands the signal to Ansible's own
  handler: ansible-playbook leaves at once, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object, write_json

ENV = "AORTA_STOP_REQUEST"
REQUEST = "request.json"
RUN = "run.json"
PHASES = ("before launch", "while training", "while collecting")


def folder(environ: Mapping[str, str] | None = None) -> str | None:
    """This ansible-playbook's stop-request folder, None outside one (a module test, ansible-console)."""
    found = (os.environ if environ is None else environ).get(ENV)
    return found if found and os.path.isdir(found) else None


def requested(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The stop request (``at``, ``signal``, ``reason``, and ``phase`` once a step claimed it), or None."""
    where = folder(environ)
    return read_json_object(os.path.join(where, REQUEST)) if where else None


def claim(phase: str, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The request with the phase it was first seen in: the first step that sees it says which one
    (the request stays with that phase after)."""
    found = requested(environ)
    where = folder(environ)
    if found is None or where is None:
        return None
    if not found.get("phase"):
        found["phase"] = phase
        with contextlib.suppress(OSError):
            write_json(os.path.join(where, REQUEST), found)
    return found


def refused(stop: Mapping[str, Any]) -> dict[str, Any]:
    """A step's answer on a node when the user's stop came before the launch: failed (the play's
    rescue tears down), and not by the node's own fault (``own`` false), so run.json names no node
    unhealthy for it and junit.xml skips its launch."""
    return {
        "failed": True,
        "changed": False,
        "own": False,
        "msg": f"not launched: the run was stopped: {stop.get('reason')}",
    }


def note_run(run_id: str, nodes: int, environ: Mapping[str, str] | None = None) -> None:
    """What the handler says about the run (run_start writes it once the run id is fixed)."""
    where = folder(environ)
    if where:
        with contextlib.suppress(OSError):
            write_json(os.path.join(where, RUN), {"run_id": run_id, "nodes": nodes})


def head_command(stop_path: str, reason: str) -> str:
    """The one command that asks the head to stop the run: its stop request written atomically."""
    quoted, tmp = shlex.quote(stop_path), shlex.quote(stop_path + ".tmp")
    return f"printf '%s\\n' {shlex.quote(reason)} > {tmp} && mv -f -- {tmp} {quoted}"


def reason_of(signal_name: str, epoch: float) -> str:
    at = dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"interrupted on the controller at {at} ({signal_name})"


class Interrupts:
    """The main process's SIGINT and SIGTERM handler in front of Ansible's (``previous``)."""

    def __init__(self, where: str, write: Callable[[str], Any], clock: Callable[[], float] = time.time) -> None:
        self.where, self.write, self.clock = where, write, clock
        self.previous: dict[int, Any] = {}
        self.count = 0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self.handle)

    def handle(self, signum: int, frame: Any = None) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        run = read_json_object(os.path.join(self.where, RUN)) or {}
        if self.count == 1:
            now = self.clock()
            try:
                request = {"at": now, "signal": name, "reason": reason_of(name, now)}
                write_json(os.path.join(self.where, REQUEST), request)
            except OSError as exc:
                self.write(f"cannot ask the run to stop ({exc.strerror}); leaving")
                self._leave(signum, frame, run)
                return
            nodes = f" on {run['nodes']} nodes" if run.get("nodes") else ""
            self.write(f"stopping the run{nodes}; interrupt again to leave now")
            return
        self._leave(signum, frame, run)

    def _leave(self, signum: int, frame: Any, run: Mapping[str, Any]) -> None:
        """Ansible's own handler, after the one command that stops the run later."""
        if run.get("run_id"):
            self.write(
                "leaving now; to stop the run later: ansible-playbook aorta.cluster.stop -i <your cluster file> "
                f"-e aorta_run_id={run['run_id']}"
            )
        previous = self.previous.get(signum)
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            os.kill(os.getpid(), signum)


_INSTALLED: list[Interrupts] = []


def install(write: Callable[[str], Any]) -> str:
    """Once per process: the request folder (in the environment the workers inherit) and the
    handler. Returns the folder."""
    if _INSTALLED:
        return _INSTALLED[0].where
    where = tempfile.mkdtemp(prefix="aorta-stop-")
    atexit.register(shutil.rmtree, where, True)
    os.environ[ENV] = where
    handler = Interrupts(where, write)
    handler.install()
    _INSTALLED.append(handler)
    return where
