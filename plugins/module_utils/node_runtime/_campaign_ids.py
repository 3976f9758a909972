# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run ids a scaling campaign gives its groups, and which campaign a run id belongs to.

Private to this collection; standard library only: the campaign (controller) makes the ids, a stop
by the campaign's id (run_attach, on each node) finds the group run that holds the node and leaves
the campaign's stop on the node (``stops/<campaign id>`` in the lease directory), which every later
group run of the campaign meets when it takes the node (_lease.take, _supervised.prepare): a stop
that lands between rungs, or while a group is in its preflight, still ends the campaign.

A group's run id is ``<campaign id>-<rung>-g<i>``, ``<rung>`` being ``opening`` (the run of every
node), ``k<size>`` or ``k<size>-rung<index>`` (a size the ladder runs a second time); the rung's
label is also its directory in the campaign's results (``<campaign dir>/<rung>/g<i>/``).
"""

from __future__ import annotations

import os
import re
import time

OPENING = "opening"
# Every label (and directory) a campaign gives a rung.
RUNG_LABEL = rf"{OPENING}|k\d+(?:-rung\d+)?"
RUNG_DIR = re.compile(RUNG_LABEL)


def group_run_id(campaign_id: str, label: str, number: int) -> str:
    """The run id of group ``number`` of the rung ``label``."""
    return f"{campaign_id}-{label}-g{int(number)}"


def campaign_of(run_id: object) -> str:
    """The campaign a group run id belongs to, or ''."""
    found = re.fullmatch(rf"(.+)-(?:{RUNG_LABEL})-g\d+", run_id) if isinstance(run_id, str) else None
    return found.group(1) if found else ""


def of_campaign(campaign_id: str, run_id: object) -> bool:
    """Whether ``run_id`` is one of the group runs of campaign ``campaign_id``."""
    return bool(campaign_id) and campaign_of(run_id) == campaign_id


STOPS = "stops"
# Every stop of a campaign's runs says this (run_attach's request; the refusal below): the campaign
# reads it in a group's run.json as a stop from outside, not a failure of its nodes.
STOP_WORDS = "stopped by aorta.cluster.stop"
STOP_KEEP_S = 14 * 86400  # as the supervisors' status files: a campaign's id is never used again


def _stop_path(directory: str, campaign_id: str) -> str | None:
    # A run id's own characters (letters, digits, '.', '_', '-'); never a path of its own.
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", campaign_id or ""):
        return None
    return os.path.join(directory, STOPS, campaign_id)


def mark_stop(directory: str, campaign_id: str, reason: str, now: float | None = None) -> bool:
    """Leave the stop of ``campaign_id`` on this node (once; older marks pruned). True when it is there."""
    path = _stop_path(directory, campaign_id)
    if path is None:
        return False
    now = time.time() if now is None else now
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            old = os.path.join(folder, name)
            if now - os.stat(old).st_mtime > STOP_KEEP_S:
                os.unlink(old)
        if not os.path.exists(path):
            with open(f"{path}.{os.getpid()}.tmp", "w") as handle:
                handle.write(reason[:500] + "\n")
            os.replace(f"{path}.{os.getpid()}.tmp", path)
    except OSError:
        return os.path.exists(path)
    return True


def stop_of(directory: str, run_id: object) -> str:
    """Why ``run_id`` may not start here: its campaign was stopped (the stop's reason), or ''."""
    campaign = campaign_of(run_id)
    path = _stop_path(directory, campaign) if campaign else None
    if path is None:
        return ""
    try:
        with open(path) as handle:
            reason = handle.read().strip()
    except OSError:
        return ""
    return f"campaign {campaign} was {reason or STOP_WORDS}: its run {run_id} does not start"
