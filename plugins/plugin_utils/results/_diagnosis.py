# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Why a run stopped, in one record (controller side, pure): run.json's ``diagnosis``.

Private to this collection.

- A hang (TIMEOUT): per rank, the last collective it entered (flight recorder: process group,
  sequence id, op, sizes) and where its main thread is (py-spy: the innermost frame, and the first
  frame in user code). In each process group, the ranks whose last collective is the lowest are
  behind: the others entered the next one and wait there for them. Without dumps, the ranks with
  the fewest steps, else the ranks stuck somewhere the others are not.
- A failure (FAILED): the rank torchrun names as the root cause (a rank that died of a peer's
  failure yields to the peer), with its exception and frame from the node's log.
- Every outcome: the nodes' kernel-log trouble (``node_errors``), from the supervisors, and what
  the supervisors saw go wrong on the node itself (``node_trouble``: a fabric path that broke, an
  output disk that filled).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import node_trouble

_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?(.*)$")
_FILE_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning))(?::\s?(.*))?$")
_LIBRARY = re.compile(r"/(site|dist)-packages/|/lib/python\d+(\.\d+)?/|^<frozen |^<string>$")


class _NoClasses(pickle.Unpickler):
    """Flight-recorder dumps hold only dicts, lists, tuples, strings and numbers: refuse anything else."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"flight-recorder dump refers to {module}.{name}: not loaded")


def load_flight_recorder(data: bytes) -> dict[str, Any]:
    """A dump as torch writes it: pickle (NCCL/RCCL's default, the stand-in's) or JSON."""
    if data[:1] in (b"{", b"["):
        return json.loads(data.decode("utf-8"))
    return _NoClasses(io.BytesIO(data)).load()


def is_user_file(path: str) -> bool:
    return bool(path) and not _LIBRARY.search(path)


def _where(name: str, path: str, line: Any) -> str:
    return f"{os.path.basename(path)}:{line} in {name}"


def stack_summary(threads: Any) -> dict[str, Any] | None:
    """The main thread of a ``py-spy dump --json``: ``frame`` (first user-code frame, innermost
    first), ``in`` (the innermost frame, what it is blocked in) and ``stack`` (all, innermost first)."""
    if not isinstance(threads, list) or not threads:
        return None
    main = next((t for t in threads if t.get("thread_name") == "MainThread"), None)
    if main is None:  # py-spy without thread names: the thread whose outermost frame is <module>
        main = next((t for t in threads if (t.get("frames") or [{}])[-1].get("name") == "<module>"), threads[0])
    frames = main.get("frames") or []
    if not frames:
        return None
    stack = [_where(f.get("name", "?"), f.get("filename", ""), f.get("line")) for f in frames]
    user = next((f for f in frames if is_user_file(f.get("filename", ""))), None)
    inner = frames[0]
    return {
        "frame": _where(user["name"], user["filename"], user["line"]) if user else stack[0],
        "in": f"{inner.get('name', '?')} ({inner.get('short_filename') or inner.get('filename', '')}"
        f":{inner.get('line')})",
        "stack": stack,
    }


def last_collectives(dump: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per process group (its name), the collective with the highest sequence id this rank entered."""
    last: dict[str, dict[str, Any]] = {}
    for entry in dump.get("entries") or []:
        if entry.get("is_p2p"):
            continue
        group = entry.get("process_group") or ("?", "")
        name = str(group[0] if isinstance(group, (list, tuple)) else group)
        seq = entry.get("collective_seq_id")
        if seq is None:
            continue
        if name not in last or seq > last[name]["seq"]:
            last[name] = {
                "group": name,
                "group_desc": str(group[1]) if isinstance(group, (list, tuple)) and len(group) > 1 else "",
                "seq": int(seq),
                "op": entry.get("profiling_name") or "?",
                "sizes": entry.get("input_sizes"),
                "state": entry.get("state"),
                "retired": entry.get("retired"),
            }
    return last


def _ranks_text(ranks: Iterable[int]) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def hang_diagnosis(ranks: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """``ranks``: global rank -> ``node``, ``steps``, ``flight_recorder`` (a loaded dump or None),
    ``stack`` (:func:`stack_summary` or None). Returns ``behind``, ``waiting``, ``method``."""
    rows = {r: dict(v) for r, v in ranks.items()}
    for row in rows.values():
        row["collectives"] = last_collectives(row["flight_recorder"]) if row.get("flight_recorder") else {}
    behind: set[int] = set()
    waiting = ""
    method = "undetermined"
    # A rank without a dump (or a stack) may be the very one the others wait for: comparing only
    # the ranks that answered would name the wrong rank without saying so. Those methods need all.
    no_dump = sorted(r for r, row in rows.items() if not row.get("flight_recorder"))
    no_stack = sorted(r for r, row in rows.items() if not row.get("stack"))
    # The flight recorder: in a group every rank has used, the lowest last collective is behind.
    groups = [] if no_dump else sorted({g for row in rows.values() for g in row["collectives"]})
    for group in groups:
        seqs = {r: row["collectives"][group]["seq"] for r, row in rows.items() if group in row["collectives"]}
        if len(seqs) < 2 or min(seqs.values()) == max(seqs.values()):
            continue
        low = min(seqs.values())
        late = {r for r, s in seqs.items() if s == low}
        ahead = sorted(set(seqs) - late)
        # What the others wait in: the collective after the one the late ranks entered last.
        nxt = min((rows[r]["collectives"][group] for r in ahead), key=lambda c: c["seq"])
        op_seq = low + 1
        op = next(
            (rows[r]["collectives"][group]["op"] for r in ahead if rows[r]["collectives"][group]["seq"] == op_seq),
            nxt["op"],
        )
        behind |= late
        group_name = f" (group {group})" if len(groups) > 1 else ""
        waiting = f"{_ranks_text(ahead)} in {op} #{op_seq}{group_name}"
        method = "flight recorder"
        break
    if not behind:
        steps: dict[int, int] = {r: int(row["steps"]) for r, row in rows.items() if row.get("steps") is not None}
        if steps and min(steps.values()) != max(steps.values()):
            low = min(steps.values())
            behind = {r for r, s in steps.items() if s == low}
            waiting = f"{_ranks_text(set(steps) - behind)} ahead, at up to {max(steps.values())} steps"
            method = "steps"
    if not behind and not no_stack:
        where = {r: row["stack"]["in"] for r, row in rows.items() if row.get("stack")}
        counts: dict[str, int] = {}
        for text in where.values():
            counts[text] = counts.get(text, 0) + 1
        if len(counts) > 1:
            common = max(counts, key=lambda k: counts[k])
            if counts[common] > 1 and list(counts.values()).count(counts[common]) == 1:
                behind = {r for r, text in where.items() if text != common}
                waiting = f"{_ranks_text(r for r, t in where.items() if t == common)} in {common}"
                method = "stacks"
    out = []
    for r in sorted(behind):
        row = rows[r]
        last = min(row["collectives"].values(), key=lambda c: c["seq"]) if row["collectives"] else None
        out.append(
            {
                "rank": r,
                "node": row.get("node"),
                "last_op": last["op"] if last else None,
                "seq": last["seq"] if last else None,
                "sizes": last["sizes"] if last else None,
                "frame": row["stack"]["frame"] if row.get("stack") else None,
                "stuck_in": row["stack"]["in"] if row.get("stack") else None,
                "steps": row.get("steps"),
            }
        )
    missing = []
    if no_dump:
        missing.append(f"no flight-recorder dump from {_ranks_text(no_dump)}")
    if no_stack:
        missing.append(f"no stack from {_ranks_text(no_stack)}")
    return {"behind": out, "waiting": waiting, "method": method, "missing_evidence": missing}


def tracebacks(log: str) -> dict[int, dict[str, Any]]:
    """The last Python traceback of each rank in a torchrun log (lines prefixed ``[rank<N>]:``):
    ``type``, ``message``, ``frame`` (innermost user-code frame) and ``frames``."""
    lines: dict[int, list[str]] = {}
    for raw in (log or "").splitlines():
        match = _PREFIX.match(raw)
        if match:
            lines.setdefault(int(match.group(1)), []).append(match.group(2))
    found = {}
    for rank, text in lines.items():
        starts = [i for i, line in enumerate(text) if line.startswith("Traceback (most recent call last)")]
        if not starts:
            continue
        frames: list[dict[str, Any]] = []
        exception: dict[str, Any] | None = None
        for line in text[starts[-1] + 1 :]:
            where = _FILE_LINE.match(line)
            if where:
                frames.append({"file": where.group(1), "line": int(where.group(2)), "name": where.group(3)})
                continue
            if line.startswith(" ") or not line.strip():
                continue
            match = _EXCEPTION.match(line.strip())
            if match:
                exception = {"type": match.group(1), "message": (match.group(2) or "").strip()}
                break
        if exception is None:
            continue
        user = [f for f in frames if is_user_file(f["file"])]
        frame = (user or frames)[-1] if (user or frames) else None
        found[rank] = dict(
            exception,
            frame=_where(frame["name"], frame["file"], frame["line"]) if frame else None,
            frames=[_where(f["name"], f["file"], f["line"]) for f in frames],
        )
    return found


def failure_diagnosis(nodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``nodes``: ``name``, ``failure`` (torchrun_failure's answer) and ``log`` (text). The rank that
    raised first: torchrun's root cause, a node whose ranks died of a peer's failure last."""
    candidates = [n for n in nodes if (n.get("failure") or {}).get("root_cause_rank") is not None]
    if not candidates:
        return {"behind": [], "waiting": "", "method": "undetermined"}
    first = min(
        candidates,
        key=lambda n: (
            bool(n["failure"].get("secondary")),
            n["failure"].get("root_cause_time") or "",
            n.get("rank", 0),
        ),
    )
    rank = int(first["failure"]["root_cause_rank"])
    raised = tracebacks(first.get("log") or "").get(rank) or {}
    others = [n["failure"]["root_cause_rank"] for n in candidates if n is not first]
    return {
        "behind": [
            {
                "rank": rank,
                "node": first.get("name"),
                "exception": raised.get("type"),
                "message": raised.get("message"),
                "frame": raised.get("frame"),
                "exit_code": first["failure"].get("root_cause_exit"),
                "at": first["failure"].get("root_cause_time"),
            }
        ],
        "waiting": f"{_ranks_text(others)} stopped after it" if others else "",
        "method": "torchrun root cause",
    }


def node_errors(nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every node's kernel trouble, with the node's name; a log that could not be read says so."""
    rows = []
    for node in nodes:
        scan = node.get("node_errors")
        if not scan:
            continue
        if scan.get("error"):
            rows.append({"node": node.get("name"), "at": None, "kind": "unreadable", "line": scan["error"]})
        for line in scan.get("lines") or []:
            rows.append({"node": node.get("name"), **line})
    return rows


def where_it_was(row: Mapping[str, Any]) -> str:
    """Where a rank of ``behind`` was: `` at <frame>``, `` in <collective it waits in>`` and, unless it
    raised, ``, last collective <op> #<seq>`` (the summary's and junit.xml's words)."""
    text = f" at {row['frame']}" if row.get("frame") else ""
    text += f" in {row['stuck_in']}" if row.get("stuck_in") else ""
    if row.get("last_op") and not row.get("exception"):
        text += f", last collective {row['last_op']} #{row.get('seq')}"
    return text


def summary(status: str, diagnosis: Mapping[str, Any]) -> str:
    """The one line for set_stats, the play's table and report.html's heading."""
    errors = [e for e in diagnosis.get("node_errors") or [] if e.get("kind") != "unreadable"]
    nodes = len({e["node"] for e in errors})
    tail = "".join(f"; {row['node']}: {row['text']}" for row in diagnosis.get("node_trouble") or [])
    tail += f"; kernel log: {len(errors)} line(s) of trouble on {nodes} node(s)" if errors else ""
    behind = diagnosis.get("behind") or []
    if not behind:
        if status == "COMPLETED":
            return "COMPLETED" + tail
        gaps = "; ".join(diagnosis.get("missing_evidence") or [])
        why = diagnosis.get("method") or "undetermined"
        return f"{status}: no rank singled out ({why}{'; ' + gaps if gaps else ''})" + tail
    parts = []
    for row in behind[:4]:
        text = f"rank {row['rank']} ({row.get('node')})"
        if row.get("exception"):
            text += f" raised {row['exception']}: {row.get('message') or ''}".rstrip()
        elif status == "TIMEOUT":
            text += " is behind"
        parts.append(text + where_it_was(row))
    more = f" (+{len(behind) - 4} more)" if len(behind) > 4 else ""
    verb = "wait in" if status == "TIMEOUT" and diagnosis.get("method") == "flight recorder" else ""
    waiting = diagnosis.get("waiting") or ""
    if waiting and verb:
        waiting = waiting.replace(" in ", f" {verb} ", 1)
    missing = list(diagnosis.get("missing_evidence") or [])
    gaps_text = f" (by {diagnosis.get('method')}: {', '.join(missing)})" if missing else ""
    return f"{status}: {'; '.join(parts)}{more}" + (f"; {waiting}" if waiting else "") + gaps_text + tail


def _read(path: str, limit: int = 64 * 1024 * 1024) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def diagnose_run(results_dir: str, status: str, nodes: list[Mapping[str, Any]], nproc: int) -> dict[str, Any]:
    """run.json's ``diagnosis`` from the results directory (``combined_traces/node_<r>/diagnostics``,
    ``logs/<node>.log``) and the nodes' records (``name``, ``rank``, ``progress``, ``failure``,
    ``node_errors``). Unreadable or missing evidence narrows the answer; it never raises."""
    evidence: list[str] = []
    problems: list[str] = []
    diagnosis: dict[str, Any]
    if status == "TIMEOUT":
        ranks: dict[int, dict[str, Any]] = {}
        for node in nodes:
            node_rank = int(node.get("rank") or 0)
            base = os.path.join("combined_traces", f"node_{node_rank}", "diagnostics", f"node_{node_rank}")
            progress = node.get("progress") or {}
            for rank in range(node_rank * nproc, (node_rank + 1) * nproc):
                row: dict[str, Any] = {"node": node.get("name"), "steps": progress.get(str(rank), progress.get(rank))}
                spy = os.path.join(base, f"rank{rank}.pyspy.json")
                data = _read(os.path.join(results_dir, spy))
                if data is not None:
                    try:
                        row["stack"] = stack_summary(json.loads(data))
                        evidence.append(spy)
                    except ValueError as exc:
                        problems.append(f"{spy}: {exc}")
                fr = os.path.join(base, f"fr_rank{rank}")
                data = _read(os.path.join(results_dir, fr))
                if data is not None:
                    try:
                        row["flight_recorder"] = load_flight_recorder(data)
                        evidence.append(fr)
                    except (ValueError, pickle.UnpicklingError, EOFError) as exc:
                        problems.append(f"{fr}: {exc}")
                ranks[rank] = row
        diagnosis = hang_diagnosis(ranks)
        diagnosis["ranks_with_stacks"] = sum(1 for r in ranks.values() if r.get("stack"))
        diagnosis["ranks_with_flight_recorder"] = sum(1 for r in ranks.values() if r.get("flight_recorder"))
        diagnosis["ranks"] = len(ranks)
    elif status == "FAILED":
        rows = []
        for node in nodes:
            log_path = os.path.join("logs", f"{node.get('name')}.log")
            data = _read(os.path.join(results_dir, log_path))
            if data is not None and (node.get("failure") or {}).get("root_cause_rank") is not None:
                evidence.append(log_path)
            rows.append(dict(node, log=(data or b"").decode("utf-8", "replace")))
        diagnosis = failure_diagnosis(rows)
    else:
        diagnosis = {"behind": [], "waiting": "", "method": "none needed" if status == "COMPLETED" else "undetermined"}
    diagnosis["kind"] = {"TIMEOUT": "hang", "FAILED": "failure"}.get(status, "none")
    diagnosis["evidence"] = evidence
    diagnosis["problems"] = problems
    diagnosis["node_errors"] = node_errors(nodes)
    diagnosis["node_trouble"] = node_trouble(nodes)
    diagnosis["capture"] = {
        str(n.get("name")): {"capture_s": n.get("capture_s"), "note": n.get("capture_note") or ""}
        for n in nodes
        if n.get("capture_s") is not None or n.get("capture_note")
    }
    diagnosis["summary"] = summary(status, diagnosis)
    return diagnosis
