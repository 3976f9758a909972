# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A rung's groups run at once, each an ordinary run: aorta_multinode.yml on the group's own
cluster file, in an ansible-playbook of its own (controller side).

Why a child ansible-playbook per group: a group is then exactly a run of today (its own head, port
picked on it, run id, secret, supervisors, deadline, sweep, collection, run.json, report and
junit.xml), with no second code path to keep in step. What it costs: one ansible-playbook process
per group, so at rung 1 as many processes as nodes; ``aorta_scaling_parallel`` bounds how many run
at once (the rest queue), and the controller polls each group's head through its own run. The
campaign head that would let one controller poll one head per rung (issue 54, item 5) is not built.

Each child runs in a session of its own, so a terminal's Ctrl-C reaches the campaign only; the
campaign's first interrupt (its stop request, plugin_utils/watch/_interrupt) is handed to every
child as one SIGINT, which each run takes as its own first Ctrl-C: it stops its nodes and records
STOPPED. No further group starts. A group's run stopped from outside (aorta.cluster.stop by its id
or the campaign's) does the same, once its ansible-playbook has ended: the campaign hands the others
their Ctrl-C rather than run on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# The collection's own playbook: the child runs the same version of the collection as the campaign.
PLAYBOOK = str(Path(__file__).resolve().parents[3] / "playbooks" / "aorta_multinode.yml")
POLL_S = 0.2  # a stop request reaches the children within this

# The campaign's own command-line options a group's run repeats (ansible.context.CLIARGS key ->
# option). The inventory is the group's own; a password prompt cannot be repeated (-k is refused).
_REPEATED = (
    ("forks", "--forks"),
    ("remote_user", "--user"),
    ("private_key_file", "--private-key"),
    ("timeout", "--timeout"),
    ("ssh_common_args", "--ssh-common-args"),
    ("ssh_extra_args", "--ssh-extra-args"),
    ("connection", "--connection"),
)


class ChildError(ValueError):
    """A campaign that cannot start its groups' runs (the message says why and what to do)."""


def repeated_options(cliargs: Mapping[str, Any]) -> list[str]:
    """The options of the campaign's command line each group's run repeats: every -e in the order
    given (so a later one still wins), verbosity, forks, user, key, SSH arguments, timeout."""
    if cliargs.get("ask_pass") or cliargs.get("become_ask_pass") or cliargs.get("ask_vault_pass"):
        raise ChildError(
            "the scaling campaign runs each group in an ansible-playbook of its own, which cannot ask for a "
            "password again: give it in the cluster file or use an SSH key or agent instead of -k/-K, and "
            "--vault-password-file or --vault-id instead of --ask-vault-pass"
        )
    options: list[str] = []
    for extra in cliargs.get("extra_vars") or ():
        options += ["-e", str(extra)]
    # Vaulted group_vars or -e @vault.yml: every group's run must open them as the campaign did.
    for vault_id in cliargs.get("vault_ids") or ():
        options += ["--vault-id", str(vault_id)]
    for secret_file in cliargs.get("vault_password_files") or ():
        options += ["--vault-password-file", str(secret_file)]
    verbosity = int(cliargs.get("verbosity") or 0)
    if verbosity:
        options.append("-" + "v" * verbosity)
    for key, flag in _REPEATED:
        value = cliargs.get(key)
        if value not in (None, "", ()):
            options += [flag, str(value)]
    return options


def child_argv(
    executable: str, source: str, options: Sequence[str], run_id: str, results_dir: str, by_variable: bool
) -> list[str]:
    """One group's ansible-playbook: the collection's aorta_multinode.yml on the group's inventory
    source, the campaign's options, then the group's run id, results directory and launch mode (last:
    they win). ``by_variable``: the campaign read its nodes from -e aorta_cluster_file (an AWX
    survey), so ``source`` is the group's cluster file, given the same way over an inventory of
    localhost alone."""
    # torchrun at every rung: ``auto`` would launch a group of one node with Aorta's own script, which
    # takes no --override (aorta_training_overrides), so rung 1 would run another workload than the
    # rungs above it and the efficiency curve would compare the two.
    # And every node of the group in its run: a node preflight excluded would still count in the group's
    # throughput per node, and its group's pace would clear it.
    ours = {
        "aorta_run_id": run_id,
        "aorta_results_dir": results_dir,
        "aorta_master_launch_mode": "torchrun",
        "aorta_exclude_unhealthy": False,
    }
    if by_variable:
        ours["aorta_cluster_file"] = source
    inventory = "localhost," if by_variable else source
    return [executable, PLAYBOOK, "-i", inventory, *options, "-e", json.dumps(ours)]


def executable(argv0: str, which: Callable[[str], str | None]) -> str:
    """The ansible-playbook beside the one running the campaign (the same installation), else the PATH's."""
    beside = os.path.join(os.path.dirname(os.path.abspath(argv0)), "ansible-playbook")
    if os.path.basename(argv0) == "ansible-playbook" and os.access(beside, os.X_OK):
        return beside
    found = which("ansible-playbook")
    if not found:
        raise ChildError("the scaling campaign needs ansible-playbook on the PATH to run each group")
    return found


def run_all(
    jobs: Sequence[tuple[Sequence[str], str]],
    parallel: int,
    stop_requested: Callable[[], bool],
    popen: Callable[..., Any] = subprocess.Popen,
    sleep: Callable[[float], None] = time.sleep,
    started: Callable[[int], None] | None = None,
    was_stopped: Callable[[int], bool] = lambda index: False,
) -> tuple[list[int | None], bool]:
    """Run ``jobs`` (argv, console log path), at most ``parallel`` at once, each in a session of
    its own with its output in its log. Returns (each job's exit code, None for one never started,
    and whether the jobs were stopped). Once a stop is requested, or a job that ended was stopped
    from outside (``was_stopped(index)``: its run recorded STOPPED, by aorta.cluster.stop), every
    running child gets one SIGINT (its run's own Ctrl-C: it stops its nodes and records) and no
    further job starts; the children are waited for, so no run is left unrecorded."""
    codes: list[int | None] = [None] * len(jobs)
    running: dict[int, Any] = {}
    waiting = list(range(len(jobs)))
    stopping = halted = False
    try:
        while waiting or running:
            if not stopping and (halted or stop_requested()):
                stopping = True
                waiting.clear()
                for child in running.values():
                    child.send_signal(signal.SIGINT)
            while waiting and len(running) < max(1, parallel):
                index = waiting.pop(0)
                argv, log = jobs[index]
                with open(log, "ab") as out:
                    running[index] = popen(
                        list(argv),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                if started:
                    started(index)
            for index, child in list(running.items()):
                code = child.poll()
                if code is not None:
                    codes[index] = code
                    del running[index]
                    halted = halted or (code != 0 and was_stopped(index))
            if running:
                sleep(POLL_S)
    except BaseException:
        # A child could not be started (no file descriptor, no memory) or this process is leaving:
        # every run already started is stopped as its own Ctrl-C stops it (once: a second SIGINT
        # would make it leave at once), and waited for.
        for child in running.values():
            if not stopping:
                with contextlib.suppress(OSError):
                    child.send_signal(signal.SIGINT)
        for child in running.values():
            with contextlib.suppress(Exception):
                child.wait()
        raise
    return codes, stopping
