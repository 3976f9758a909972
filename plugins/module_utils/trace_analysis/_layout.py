# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Aorta's trace layout: which of a rank directory's files are one profiler window written twice.

Private to this collection; standard library only (it runs on the nodes with trace_summary).

With ``profiling.tensorboard`` and ``profiling.chrome_trace`` both on (Aorta's
``config/distributed.yaml``), Aorta exports the same profiler object twice into
``torch_profiler/rank<N>/`` after its loop (``fsdp_trainer.py``, one export after the other):
``tensorboard_trace_handler`` writes ``<host>_<pid>.<time_ns>.pt.trace.json``, then
``export_chrome_trace`` asks for ``trace.json`` (or ``trace_step<N>.json``). torch 2.13 saves a
profiler's trace once ("Trace is already saved.", which Aorta logs as a warning), so there only the
first file is written (the stand-in shows it); a build that saves twice leaves both, the same
window: analysed twice, the rank would count twice or read as two ranks' files.
"""

from __future__ import annotations

import os

_TENSORBOARD = (".pt.trace.json", ".pt.trace.json.gz")
_TRACE = (".json", ".json.gz")


def aorta_pairs(paths) -> dict:
    """{TensorBoard copy: the Chrome trace of the same window} for each directory of ``paths``
    that holds exactly one of each, Aorta's pair; any other mix is left alone (several windows,
    someone else's files)."""
    by_dir: dict = {}
    for path in paths:
        by_dir.setdefault(os.path.dirname(path), []).append(path)
    pairs = {}
    for files in by_dir.values():
        tensorboard = [p for p in files if p.endswith(_TENSORBOARD)]
        chrome = [p for p in files if p.endswith(_TRACE) and not p.endswith(_TENSORBOARD)]
        if len(tensorboard) == 1 and len(chrome) == 1:
            pairs[tensorboard[0]] = chrome[0]
    return pairs
