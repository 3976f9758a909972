# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run ids a scaling campaign gives its groups, and which campaign a run id belongs to.

Private to this collection; standard library only: the campaign (controller) makes the ids, a stop
by the campaign's id (run_attach, on each node) finds the group run that holds the node.

A group's run id is ``<campaign id>-<rung>-g<i>``, ``<rung>`` being ``opening`` (the run of every
node), ``k<size>`` or ``k<size>-rung<index>`` (a size the ladder runs a second time); the rung's
label is also its directory in the campaign's results (``<campaign dir>/<rung>/g<i>/``).
"""

from __future__ import annotations

import re

OPENING = "opening"
# Every label (and directory) a campaign gives a rung.
RUNG_LABEL = rf"{OPENING}|k\d+(?:-rung\d+)?"
RUNG_DIR = re.compile(RUNG_LABEL)


def group_run_id(campaign_id: str, label: str, number: int) -> str:
    """The run id of group ``number`` of the rung ``label``."""
    return f"{campaign_id}-{label}-g{int(number)}"


def of_campaign(campaign_id: str, run_id: object) -> bool:
    """Whether ``run_id`` is one of the group runs of campaign ``campaign_id``."""
    if not campaign_id or not isinstance(run_id, str):
        return False
    return re.fullmatch(rf"{re.escape(campaign_id)}-(?:{RUNG_LABEL})-g\d+", run_id) is not None
