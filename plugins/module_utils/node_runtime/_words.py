# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Words every side prints the same way: a count with its noun, the first names of a list and how
many more (one line, whatever the node count), a controller time in UTC.

Private to this collection; standard library only (the nodes' Python and the controller's both
import it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def plural(count: int, noun: str, nouns: str = "") -> str:
    """``1 node``, ``3 nodes`` (``nouns`` where the plural is not ``noun + 's'``)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def first_names(names: Iterable[Any], shown: int, total: int | None = None, sep: str = ", ") -> str:
    """The first ``shown`` of ``names`` joined by ``sep``, then ``and N more`` when there are more:
    ``a, b, c and 997 more``. ``total``: how many there are when ``names`` holds only some."""
    listed = [str(name) for name in names]
    count = len(listed) if total is None else total
    more = count - min(shown, len(listed))
    return sep.join(listed[:shown]) + (f" and {more} more" if more > 0 else "")


def utc(epoch: Any, unknown: str = "") -> str:
    """A controller time (seconds since the epoch) as ``YYYY-MM-DD HH:MM:SS UTC``; ``unknown`` when
    it is not a number."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        return unknown
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))
