# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The console a healthy run prints, the same from an installed collection as from the checkout;
the run's own lines kept in its results directory (console.log) with its effective variables.

Private to this collection (controller side). The checkout's ansible.cfg hides ``ok`` and
``skipping`` results (a healthy run prints no line per node and task), but an installed collection
never reads it: run from anywhere else, a 3-node run printed 190 lines against 73, and 1000 nodes
would print a line per node for each of their three tasks. The stdout callback reads its options
from the environment when it is loaded, after the inventory is parsed; the inventory plugin, which
every run from a cluster file goes through, calls ``quiet_by_default`` first. A value the user set
(environment or their ansible.cfg's [defaults]) always wins.
"""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

# The default callback's options a healthy run keeps off, and the variables it reads them from.
QUIET = {"display_ok_hosts": "ANSIBLE_DISPLAY_OK_HOSTS", "display_skipped_hosts": "ANSIBLE_DISPLAY_SKIPPED_HOSTS"}


def user_set(config_file: str | None) -> set[str]:
    """The options of QUIET that the ansible.cfg in use sets in [defaults] (none without one, or
    when it cannot be read: then the environment alone decides)."""
    if not config_file:
        return set()
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(config_file, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return set()
    if not parser.has_section("defaults"):
        return set()
    return {option for option in QUIET if parser.has_option("defaults", option)}


def quiet_by_default(environ: MutableMapping[str, str], config_file: str | None) -> list[str]:
    """Hide ok and skipped results unless the user chose: set each variable of QUIET to False in
    ``environ`` when neither it nor ``config_file`` sets the option. Returns the variables set."""
    chosen = user_set(config_file)
    changed = []
    for option, variable in QUIET.items():
        if variable in environ or option in chosen:
            continue
        environ[variable] = "False"
        changed.append(variable)
    return changed


def apply() -> list[str]:
    """``quiet_by_default`` on this process's environment and the config file Ansible read."""
    try:
        from ansible import constants  # noqa: PLC0415 - only where ansible-core runs (the controller)

        config_file = constants.config.config_file
    except (ImportError, AttributeError):
        config_file = None
    return quiet_by_default(os.environ, config_file)


# The run's own lines, as it printed them, beside run.json.
LOG = "console.log"


def log_lines(results_dir: str | None, lines: Iterable[str]) -> None:
    """Append ``lines`` to the run's console.log; nothing when the directory is not there (check
    mode, a folder of traces) or cannot be written (the console has them anyway)."""
    if not results_dir or not os.path.isdir(results_dir):
        return
    try:
        with open(os.path.join(results_dir, LOG), "a", encoding="utf-8") as handle:
            handle.writelines(f"{line}\n" for line in lines)
    except OSError:
        pass


def printer(results_dir: str | None, show: Callable[[str], Any]) -> Callable[[str], None]:
    """``show`` (the console) that also appends each line to the run's console.log."""

    def say(line: str) -> None:
        show(line)
        log_lines(results_dir, [line])

    return say


# Values of the effective variables that are never written: any key of a mapping (aorta_environment,
# aorta_extra_env: a token for a model hub, a registry password) whose name says it is a secret.
SECRET = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|(?:^|_)KEY$|API_?KEY|PRIVATE", re.IGNORECASE)
MASK = "********"


def masked(value: Any, name: str = "") -> Any:
    """``value`` with every value under a secret-looking name replaced by MASK (nested mappings
    and lists too)."""
    if name and SECRET.search(name):
        return MASK
    if isinstance(value, Mapping):
        return {str(key): masked(item, str(key)) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(item) for item in value]
    return value


def effective_variables(values: Mapping[str, Any]) -> dict[str, Any]:
    """The run's effective aorta_* variables as run_start read them, secrets masked, sorted."""
    return {name: masked(values[name], name) for name in sorted(values)}
