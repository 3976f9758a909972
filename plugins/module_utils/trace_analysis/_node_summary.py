# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's summary of its own traces as a file: made on the node, read on the controller.

Private to this collection. Runs on the nodes (Python >= 3.9, standard library; msgspec when
there). At 1000 nodes the summaries came back inside each node's task result, through
ansible-playbook's single main process (about a gigabyte): here they are written as one gzip file
in the node's run directory, which node_end fetches and checks against its sha256, and the task
result carries only its path, hash and a few figures. The same file lists every file the run's
collection would take (path, size, sha256, the ranks it declares), so the manifest can list the
traces that stay on the node, and a later pull can verify them.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sys
import time

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _decode
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._analysis import (
    analyse_all,
    find_run_traces,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import (
    TraceError,
    distributed_ranks,
    find_new_files,
    sha256_file,
)

FORMAT = "aorta-node-summary/1"


def listing(root: str, since: float) -> list:
    """Every file the run's collection takes from ``root`` (_traces.find_new_files): path relative
    to ``root``, size, sha256 and the ranks a trace declares (empty for other files)."""
    rows = []
    for rel in find_new_files(root, since):
        path = os.path.join(root, rel)
        try:
            ranks = distributed_ranks(path)
        except TraceError:
            ranks = []
        rows.append({"path": rel, "size": os.path.getsize(path), "sha256": sha256_file(path), "ranks": ranks})
    return rows


def _peak_rss_mb() -> float:
    """This process's peak resident memory and its children's, in MB (Linux reports KB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, children) / 1024.0, 1)


def summarise(root: str, since: float, dest: str, include_unlinked_kernels: bool = False, max_workers: int = 1) -> dict:
    """Analyse the traces under ``root`` (those the collection takes), list every file the collection
    takes, and write both to ``dest`` (gzip JSON, renamed into place). Returns what the task result
    carries: the file's path, size and sha256, and the analysis' figures (seconds, decoder, peak
    memory, the traces' count and bytes)."""
    started = time.monotonic()
    paths = find_run_traces(root, since)
    summaries = analyse_all(paths, include_unlinked_kernels, max_workers)
    analysis_s = round(time.monotonic() - started, 3)
    files = listing(root, since)
    figures = {
        "analysis_s": analysis_s,
        "decoder": "msgspec" if _decode.msgspec is not None else "json",
        "python": "{}.{}".format(*sys.version_info[:2]),
        "peak_rss_mb": _peak_rss_mb(),
        "traces": len(paths),
        "bytes": sum(os.path.getsize(p) for p in paths),
        "files": len(files),
        "files_bytes": sum(row["size"] for row in files),
    }
    body = {"format": FORMAT, "root": root, "since": since, "figures": figures, "summaries": summaries, "files": files}
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    partial = f"{dest}.partial"
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=6) as handle:
        json.dump(body, handle, separators=(",", ":"))
    os.replace(partial, dest)
    return dict(figures, path=dest, size=os.path.getsize(dest), sha256=sha256_file(dest))


def read(path: str) -> dict:
    """A node's summary file as the controller reads it; ValueError naming the file when it is not one."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            body = json.load(handle)
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{path}: not a node summary ({type(exc).__name__}: {exc})") from None
    said = body.get("format") if isinstance(body, dict) else None
    if said != FORMAT:
        raise ValueError(f"{path}: not a node summary (format {said!r})")
    return body
