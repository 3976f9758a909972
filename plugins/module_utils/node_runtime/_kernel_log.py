# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's kernel log over the run's window, filtered for GPU, driver and fabric trouble.

Private to this collection; target side, standard library only. The supervisor calls ``scan``
after every outcome, on the node's own clock: ``journalctl -k`` for the window, else ``dmesg``
(its ISO times filtered to the window). A log that cannot be read is said so, never an error.

PATTERNS is the one list of what counts as trouble (docs/troubleshooting.md shows it): each entry
is (name, regular expression), matched case-insensitively against one kernel line.
"""

from __future__ import annotations

import datetime
import re
import subprocess

PATTERNS = (
    ("amdgpu", r"\bamdgpu\b.*(error|fail|fault|timeout|reset|hang|ring .* timeout|\bbad\b)"),
    ("gpu reset", r"gpu (reset|recover)|mode[12] reset|\bgpu hang\b"),
    ("page fault", r"(vm|gpu|gfxhub|mmhub) ?(page )?fault|\[gfxhub\]|retry page fault"),
    ("xgmi", r"\bxgmi\b.*(error|fail|down|lost|timeout)"),
    ("ras", r"\bras\b.*(error|poison|uncorrect|ue\b|ce\b)|\bpoison(ed)? (consumption|page)|uncorrectable"),
    ("mce", r"\bmce\b|machine check|hardware error"),
    ("hung task", r"hung_task|blocked for more than \d+ seconds|soft lockup|hard lockup|rcu.*stall"),
    ("oom", r"out of memory|oom-kill|killed process \d+"),
    ("nic link down", r"\blink (is )?down\b|nic link is down|carrier lost|link flap"),
    ("rdma", r"\b(mlx5|bnxt_re|ionic|irdma|rdma)\b.*(error|fail|fatal|timeout|down)"),
    ("pcie", r"\baer\b.*(error|uncorrect)|pcie bus error|surprise (link )?down"),
)
_COMPILED = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in PATTERNS)
MAX_LINES = 200  # per node: a flood of one message must not swamp run.json


def match(line):
    """The name of the first pattern ``line`` matches, else None."""
    for name, pattern in _COMPILED:
        if pattern.search(line):
            return name
    return None


def _run(argv, timeout):
    # Called by the supervisor long after the module's arguments were read, with a timeout:
    # AnsibleModule.run_command has none, and a stuck journalctl must not hold the node's cleanup.
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)  # pylint: disable=ansible-bad-function
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if proc.returncode != 0:
        return None, (proc.stderr.decode("utf-8", "replace").strip() or f"exit {proc.returncode}")[-300:]
    return proc.stdout.decode("utf-8", "replace"), ""


def _iso_epoch(stamp):
    """Epoch seconds of dmesg's or journalctl's ISO stamp (``2026-12-01T12:44:05,123456+00:00``)."""
    text = stamp.replace(",", ".")
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        # Python < 3.11 takes no "+0000" offset without a colon.
        fixed = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", text)
        try:
            return datetime.datetime.fromisoformat(fixed).timestamp()
        except ValueError:
            return None


def _lines(text, start, end, filtered):
    """(epoch, line) pairs of the window, from ``<ISO stamp> <rest>`` lines."""
    for line in text.splitlines():
        stamp, _sep, rest = line.partition(" ")
        at = _iso_epoch(stamp)
        if at is None:
            continue
        if not filtered and not (start <= at <= end):
            continue
        yield at, rest.strip()


COMMAND_S = 10  # each of journalctl and dmesg
WORST_S = 2 * COMMAND_S  # journalctl, then dmesg when it fails


def read(start, end, runner=_run, timeout=COMMAND_S):
    """Kernel lines between epochs ``start`` and ``end``: (source, [(epoch, line)], error)."""
    since, until = f"@{int(start)}", f"@{int(end) + 1}"
    text, error = runner(
        ["journalctl", "-k", "-q", "--no-pager", "-o", "short-iso-precise", "--since", since, "--until", until],
        timeout,
    )
    if text is not None:
        return "journalctl", list(_lines(text, start, end, filtered=True)), ""
    errors = [f"journalctl: {error}"]
    text, error = runner(["dmesg", "--time-format", "iso"], timeout)
    if text is not None:
        return "dmesg", list(_lines(text, start, end, filtered=False)), ""
    errors.append(f"dmesg: {error}")
    return None, [], "; ".join(errors)


def scan(start, end, runner=_run, timeout=COMMAND_S):
    """The node's kernel trouble in the window, as stored in the status file and run.json."""
    source, lines, error = read(start, end, runner, timeout)
    if source is None:
        return {"source": None, "error": f"kernel log not readable ({error})", "lines": []}
    found = []
    for at, line in lines:
        kind = match(line)
        if kind:
            found.append({"at": round(at, 3), "kind": kind, "line": line[:500]})
    return {"source": source, "error": "", "lines": found[:MAX_LINES], "dropped": max(0, len(found) - MAX_LINES)}
