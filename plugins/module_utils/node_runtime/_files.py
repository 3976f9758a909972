# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one atomic write of the collection (node and controller side, standard library only).

Private to this collection. The supervisor's status and attach files on the node, the controller's
run.json, settings and report files: a reader (the head's aggregator, a watch, a browser) sees the
old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os


def write_text_atomic(path, text, mode=None):
    """``text`` into ``path`` through a temporary file beside it (named by this process, so two
    writers never share one). With ``mode``, the file has it from its first byte (it may hold a
    secret); without, the umask's. The temporary file is removed when the write fails."""
    tmp = f"{path}.{os.getpid()}.tmp"
    opener = None if mode is None else (lambda name, flags: os.open(name, flags, mode))
    try:
        with open(tmp, "w", encoding="utf-8", opener=opener) as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(tmp, mode)  # the umask may have taken bits off
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
