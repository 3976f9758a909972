# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One merged timeline of every rank (Chrome trace / Perfetto JSON), bounded in size.

Private to this collection; standard library only (the per-rank selection runs on the nodes too).

Per trace, ``select`` keeps every profiler step and every collective, then the longest GPU events
(or, on a CPU-only trace, the longest ``record_function`` ranges) until the trace's budget: a
tenth of its events, at most ``MOST``. Times become wall-clock microseconds with the trace's
``baseTimeNanoseconds``. ``merge`` gives each rank a process named ``rank <g> · <node>`` and moves
each node's events by that node's clock offset (the node's clock minus the controller's, measured
in preflight), so all nodes share the controller's clock; the file's ``otherData`` says how.
"""

from __future__ import annotations

import heapq

SHARE = 0.10  # of a trace's events kept, at most
MOST = 5000  # events per rank, at most (8 ranks x 1000 nodes must stay viewable)
LEAST = 64  # a tiny trace still shows its steps


def select(event_count, base_ns, steps, collectives, activity, share=SHARE, most=MOST):
    """This trace's part of the timeline. ``steps`` and ``collectives`` are (name, (start, end)),
    ``activity`` (name, (start, end), lane); times in the trace's microseconds."""
    budget = max(LEAST, min(most, int(event_count * share)))
    kept = [[name, "steps", start, end - start] for name, (start, end) in sorted(steps, key=lambda x: x[1])]
    kept += [
        [name, "collectives", start, end - start] for name, (start, end) in sorted(collectives, key=lambda x: x[1])
    ]
    kept = kept[:budget]
    room = budget - len(kept)
    longest = heapq.nlargest(max(room, 0), activity, key=lambda item: item[1][1] - item[1][0])
    least_us = min((end - start for _name, (start, end), _lane in longest), default=None)
    kept += [[name, f"{lane}", start, end - start] for name, (start, end), lane in longest]
    return {
        "base_us": (base_ns or 0) / 1000.0,
        "events": kept,
        "source_events": event_count,
        "dropped_activity": len(activity) - len(longest),
        "least_activity_us": least_us,
    }


def _lane_name(lane):
    if lane in ("steps", "collectives", "cpu"):
        return {"steps": "profiler steps", "collectives": "collectives", "cpu": "CPU ranges"}[lane]
    return f"GPU stream {lane}"


def merge(ranks, offsets_s=None):
    """The timeline document. ``ranks``: {global rank: (node, select() result)}; ``offsets_s``:
    {node: node clock minus controller clock, seconds}."""
    offsets_s = offsets_s or {}
    events, source, dropped, least = [], 0, 0, []
    for rank in sorted(ranks):
        node, part = ranks[rank]
        events.append(
            {"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank} · {node}"}}
        )
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        shift = part.get("base_us", 0.0) - float(offsets_s.get(node) or 0.0) * 1e6
        lanes = {}
        for name, lane, start, dur in part.get("events") or []:
            if lane not in lanes:
                lanes[lane] = len(lanes) + 1
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": rank,
                        "tid": lanes[lane],
                        "args": {"name": _lane_name(lane)},
                    }
                )
            events.append(
                {
                    "ph": "X",
                    "name": str(name),
                    "cat": lane,
                    "pid": rank,
                    "tid": lanes[lane],
                    "ts": round(start + shift, 3),
                    "dur": round(dur, 3),
                }
            )
        source += part.get("source_events", 0)
        dropped += part.get("dropped_activity", 0)
        if part.get("least_activity_us") is not None:
            least.append(part["least_activity_us"])
    kept = sum(1 for e in events if e["ph"] == "X")
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "aorta.cluster",
            "clock": "wall-clock microseconds of the controller: each node's events moved by minus its "
            "clock offset (node clock minus controller clock, measured in preflight)",
            "clock_offsets_s": {str(k): v for k, v in sorted(offsets_s.items())},
            "selection": f"every profiler step and collective, then the longest GPU events (CPU ranges on a "
            f"CPU-only trace) up to {SHARE:.0%} of each trace's events, at most {MOST} per rank",
            "source_events": source,
            "kept_events": kept,
            "dropped_activity_events": dropped,
            "shortest_kept_activity_us": min(least) if least else None,
        },
    }
