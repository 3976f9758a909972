# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's id, start and results directory, fixed once on the controller (controller side).

Private to this collection. aorta.cluster.run_start does what four tasks did (two set_fact, a
check and a file module run): with the role's set_fact that keeps its values, two task results and
no module process on the controller.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
from typing import Any

# The values it returns, which the role run_context keeps with set_fact (every play reads them).
FACTS = ("aorta_run_id_resolved", "aorta_run_started_epoch", "aorta_results_dir_resolved")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class RunStartError(Exception):
    """A run id or results directory that cannot be used; the message names the variable."""


def run_id(given: str, now: dt.datetime, suffix: str | None = None) -> str:
    """``given``, else the UTC start time and 6 random hex digits (two runs in one second differ)."""
    value = str(given or "") or f"{now:%Y%m%dT%H%M%S}-{suffix or secrets.token_hex(3)}"
    if not RUN_ID.match(value):
        raise RunStartError(f"aorta_run_id: {value} may hold only letters, digits, '.', '_' and '-' (64 at most)")
    return value


# The key of the HMAC on every message between the nodes' supervisors and the head's aggregator.
SECRET_ENV = "AORTA_RUN_SECRET"
SECRET = re.compile(r"^[0-9a-fA-F]{64}$")


def run_secret(environ: Any) -> str:
    """``AORTA_RUN_SECRET`` from the controller's environment (64 hex digits, e.g. from an AWX
    credential), else 32 random bytes as hex. The error never holds the value."""
    given = str(environ.get(SECRET_ENV) or "")
    if not given:
        return secrets.token_hex(32)
    if not SECRET.match(given):
        raise RunStartError(f"{SECRET_ENV}: must be 64 hex digits (32 bytes)")
    return given


def results_dir(given: str, root: str, run: str, cwd: str) -> str:
    """``given``, else ``root``/<run id> (``root`` defaults to aorta_results); a relative path is taken
    from the directory ansible-playbook runs in."""
    path = str(given or "") or os.path.join(str(root or "") or "aorta_results", run)
    return os.path.realpath(os.path.join(cwd, path))


def start(settings: dict[str, Any], now: dt.datetime, cwd: str) -> dict[str, Any]:
    """The facts the plays read: aorta_run_id_resolved, aorta_run_started_epoch, aorta_results_dir_resolved."""
    run = run_id(settings.get("aorta_run_id") or "", now)
    return {
        "aorta_run_id_resolved": run,
        "aorta_run_started_epoch": int(now.timestamp()),
        "aorta_results_dir_resolved": results_dir(
            settings.get("aorta_results_dir") or "", settings.get("aorta_results_root") or "", run, cwd
        ),
    }


def make_dirs(results: str) -> bool:
    """The results directory and its logs/ (0755); True when something was created."""
    logs = os.path.join(results, "logs")
    if os.path.isdir(logs):
        return False
    try:
        os.makedirs(logs, mode=0o755, exist_ok=True)
    except OSError as exc:
        raise RunStartError(f"aorta_results_dir: cannot create {logs}: {exc.strerror}") from None
    return True
