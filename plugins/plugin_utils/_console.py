# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The console a healthy run prints, the same from an installed collection as from the checkout.

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
from collections.abc import MutableMapping

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
