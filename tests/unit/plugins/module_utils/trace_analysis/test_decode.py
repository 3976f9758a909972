# SPDX-License-Identifier: GPL-3.0-or-later
"""Decoding Kineto traces: msgspec and the standard library give the same events and figures, the
chunked decoding survives cuts inside strings, and a file that is not a trace is named."""

from __future__ import annotations

import gzip
import json

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _decode

ROWS = ("computation_time", "exposed_comm_time", "exposed_memcpy_time", "busy_time", "idle_time", "total_time")


def test_standard_library_alone_gives_the_same_figures(fixtures_dir, monkeypatch):
    """Nodes without msgspec decode with json; the figures must not change."""
    path = str(fixtures_dir / "traces" / "mi300" / "resnet-act-checkpoint.json.gz")
    fast = _analysis.analyse(path)
    monkeypatch.setattr(_decode, "msgspec", None)
    plain = _analysis.analyse(path)
    for row in ROWS:
        assert plain["gpu_timeline"][row] == pytest.approx(fast["gpu_timeline"][row], rel=1e-12)
    assert plain["collectives"] == fast["collectives"]
    assert plain["iterations"] == fast["iterations"]
    bad = _analysis.safe_analyse(str(fixtures_dir / "traces" / "README.md"))
    assert bad["skipped"].endswith("not a profiler trace (no traceEvents), skipped")


def test_chunked_decoding_survives_cuts_inside_strings(tmp_path, monkeypatch):
    """Events are decoded a few MB at a time, cut after '},'; a name holding '},' must not break it."""

    def step(name, ts, dur, cat="user_annotation", tid=1):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}

    events = []
    for i in range(400):
        events.append(step(f"ProfilerStep#{i}", i * 1000.0, 900.0))
        events.append(step('weird},{"name": "x"},', i * 1000.0, 400.0, cat="cpu_op"))
        events.append(step("gloo:all_reduce", i * 1000.0 + 400, 500.0, tid=2))
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events}))
    monkeypatch.setattr(_decode, "_CHUNK_BYTES", 97)  # cuts land everywhere, inside strings too
    chunked = _analysis.analyse(str(path))
    monkeypatch.setattr(_decode, "msgspec", None)
    plain = _analysis.analyse(str(path))
    assert chunked["iterations"] == plain["iterations"] and chunked["iterations"]["count"] == 400
    assert chunked["comm_time_ms"] == pytest.approx(plain["comm_time_ms"])
    assert chunked["compute_time_ms"] == pytest.approx(plain["compute_time_ms"])


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b'{"traceEvents": [', "not a Kineto trace"),
        (b"[1, 2]", "not a profiler trace .no traceEvents., skipped"),
        (b'{"a": 1}', "not a profiler trace .no traceEvents., skipped"),
        (b'{"schemaVersion": 1, "distributedInfo": {"rank": 0}', "no traceEvents .cut short"),
        (b'{"traceEvents": {"a": 1}}', "not a Kineto trace"),
    ],
)
def test_a_file_that_is_not_a_trace_is_named_with_why(tmp_path, monkeypatch, fast, content, words):
    if not fast:
        monkeypatch.setattr(_decode, "msgspec", None)
    path = tmp_path / "rank0.json"
    path.write_bytes(content)
    with pytest.raises(_decode.TraceFileError, match=words) as caught:
        list(_decode.load(str(path))[0])
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("fast", [True, False])
def test_events_names_args_and_distributed_info_are_read_the_same_both_ways(tmp_path, monkeypatch, fast):
    if not fast:
        monkeypatch.setattr(_decode, "msgspec", None)
    trace = {
        "distributedInfo": {"rank": 3, "world_size": 8},
        "baseTimeNanoseconds": 17,
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k\u00e9", "ts": 1.5, "dur": 2, "pid": 0, "tid": 7,
             "args": {"correlation": 42}},
            {"ph": "i", "name": "marker"},
        ],
    }  # fmt: skip
    path = tmp_path / "rank3.json.gz"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    batches, info, _devices, base_ns = _decode.load(str(path))
    events = [event for batch in batches for event in batch]
    assert info == {"rank": 3, "world_size": 8} and base_ns == 17
    assert [(e.ph, e.cat, e.name, e.ts, e.dur) for e in events] == [
        ("X", "kernel", "k\u00e9", 1.5, 2),
        ("i", "", "marker", 0.0, 0.0),
    ]
    assert events[0].args.correlation == 42 and events[1].args.correlation is None


def _steps_trace(after_events=None):
    """Ten 1 ms profiler steps, each with a gloo collective, and whatever keys follow the events."""
    events = []
    for i in range(10):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "ts": i * 1000.0,
                "dur": 1000.0,
                "pid": 1,
                "tid": 1,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "gloo:all_reduce",
                "ts": i * 1000.0 + 600,
                "dur": 300.0,
                "pid": 1,
                "tid": 1,
                "args": {"correlation": i},
            }
        )
    trace = {"distributedInfo": {"rank": 1, "world_size": 2}, "traceEvents": events}
    trace.update(after_events or {})
    return trace  # fmt: skip


@pytest.mark.parametrize(
    "after",
    [
        {"baseTimeNanoseconds": 5, "traceName": "x]"},  # the last ] is inside a string
        {"others": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1}], "baseTimeNanoseconds": 5},
        {"others": [1, 2], "baseTimeNanoseconds": 5},
    ],
)
def test_keys_and_arrays_after_the_events_are_read_right(tmp_path, monkeypatch, after):
    """The quick outline takes the events to end at the file's last ]; when that is not so, the
    figures are still those of a full decode."""
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(_steps_trace(after)))
    quick = _analysis.analyse(str(path))
    monkeypatch.setattr(_decode, "msgspec", None)
    plain = _analysis.analyse(str(path))
    assert quick["iterations"] == plain["iterations"] and quick["iterations"]["count"] == 10
    assert quick["comm_time_ms"] == pytest.approx(plain["comm_time_ms"]) == pytest.approx(3.0)
    assert quick["rank"] == 1


def test_names_and_args_of_another_type_are_read_leniently(tmp_path):
    """A batch where a name is not a string or args are not an object is decoded anyway."""
    trace = _steps_trace()
    trace["traceEvents"] += [
        {"ph": "X", "cat": "cpu_op", "name": 7, "ts": 1.0, "dur": 1.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "ts": 1.0, "dur": 1.0, "args": None},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "ts": 1.0, "dur": 1.0, "args": [1]},
    ]
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(trace))
    batches, *_rest = _decode.load(str(path))
    events = [event for batch in batches for event in batch]
    assert [e.name for e in events[-3:]] == ["", "hipLaunchKernel", "hipLaunchKernel"]
    assert [e.args.correlation for e in events[-3:]] == [None, None, None]
    assert events[1].args.correlation == 0
    assert _analysis.analyse(str(path))["comm_time_ms"] == pytest.approx(3.0)


def test_a_timestamp_that_is_not_a_number_names_the_file(tmp_path):
    trace = _steps_trace()
    trace["traceEvents"][3]["ts"] = "soon"
    path = tmp_path / "rank1.json"
    path.write_text(json.dumps(trace))
    result = _analysis.safe_analyse(str(path))
    assert str(path) in result["error"] and "not a Kineto trace" in result["error"], result
