# SPDX-License-Identifier: GPL-3.0-or-later
"""The merged timeline: every rank a process named with its node, steps and collectives kept, the
longest activity up to a tenth of the events, nodes' clock offsets applied, size bounded."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _timeline
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report

STRAGGLERS = Path(__file__).parent / "straggler_data"


def test_every_rank_of_a_recorded_run_is_a_process_with_its_steps_and_collectives(tmp_path):
    report = _report.build_report(str(STRAGGLERS / "ok1"))
    paths = _outputs.write_outputs(report, str(tmp_path))
    timeline = json.loads(Path(paths["timeline"]).read_text())
    names = {e["pid"]: e["args"]["name"] for e in timeline["traceEvents"] if e["name"] == "process_name"}
    assert sorted(names) == [0, 1, 2, 3] and all(n.startswith(f"rank {r} · ") for r, n in names.items())
    spans = [e for e in timeline["traceEvents"] if e["ph"] == "X"]
    for rank in range(4):
        mine = [e for e in spans if e["pid"] == rank]
        source = json.loads(gzip.decompress((STRAGGLERS / "ok1" / f"rank{rank}.json.gz").read_bytes()))
        steps = [e for e in source["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
        collectives = [e for e in source["traceEvents"] if e.get("name", "").startswith("gloo:")]
        assert sum(e["cat"] == "steps" for e in mine) == len(steps)
        assert sum(e["cat"] == "collectives" for e in mine) == len(collectives)
        # Wall-clock microseconds: the trace's baseTimeNanoseconds applied.
        first = min(e["ts"] for e in steps) + source["baseTimeNanoseconds"] / 1000.0
        assert min(e["ts"] for e in mine if e["cat"] == "steps") == pytest.approx(first, abs=1)
    assert "timeline" not in json.loads(Path(paths["report"]).read_text())


def test_a_gpu_trace_keeps_at_most_a_tenth_of_its_events_and_the_longest_first(tmp_path, fixtures_dir):
    name = "mi300/resnet-act-checkpoint.json.gz"
    (tmp_path / "t").mkdir()
    shutil.copy(fixtures_dir / "traces" / name, tmp_path / "t" / "trace.json.gz")
    report = _report.build_report(str(tmp_path / "t"))
    timeline = report["_timeline"]
    other = timeline["otherData"]
    assert 0 < other["kept_events"] <= 0.1 * other["source_events"]
    raw = gzip.decompress((tmp_path / "t" / "trace.json.gz").read_bytes())
    assert len(json.dumps(timeline)) <= 0.1 * len(raw)
    kept = [e["dur"] for e in timeline["traceEvents"] if e["ph"] == "X" and e["cat"] not in ("steps", "collectives")]
    assert min(kept) == pytest.approx(other["shortest_kept_activity_us"], abs=1e-3)


def test_each_nodes_clock_offset_moves_its_ranks_onto_the_controllers_clock():
    part = _timeline.select(1000, 2_000_000_000, [("ProfilerStep#1", (10.0, 20.0))], [], [])
    merged = _timeline.merge({0: ("a", part), 1: ("b", part)}, {"a": 0.0, "b": 1.5})
    starts = {e["pid"]: e["ts"] for e in merged["traceEvents"] if e["ph"] == "X"}
    # Node b's clock runs 1.5 s ahead of the controller's: its events move 1.5 s earlier.
    assert starts[0] - starts[1] == pytest.approx(1.5e6)
    assert merged["otherData"]["clock_offsets_s"] == {"a": 0.0, "b": 1.5}
