# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-trace metrics from a Kineto (torch.profiler) Chrome trace, TraceLens-compatible.

Private to this collection. Standard library only, so the per-rank step can run on the nodes;
uses msgspec typed decoding (only the fields needed, ``args`` left raw until a GPU or launch event
needs them) when it is installed, which decodes faster than orjson builds a full object tree.

``gpu_timeline`` follows TraceLens' definitions: GPU events are ``kernel``, ``gpu_memcpy`` and
``gpu_memset``; by default only those a launch links to (a ``cuda_runtime``/``cuda_driver`` event
with the same ``correlation``, an ``ac2g`` flow start with that id and its flow end at the GPU
event's pid/tid), and every GPU event carrying the correlation of a graph launch
(``cudaGraphLaunch``/``hipGraphLaunch``: one launch replays many kernels, no flow of their own);
a kernel whose name contains ``nccl``, ``rccl`` or ``cross_device_reduce`` is communication,
``gpu_memcpy`` and the kernels ROCm 7.1 names for copies (``MEMORY_COPY_*``,
``__amd_rocclr_copyBuffer*``) are memcpy, every other kernel (``__amd_rocclr_fillBuffer*`` too)
and memset is computation; times are lengths of interval unions.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
import statistics
from concurrent.futures import ProcessPoolExecutor

from ansible_collections.aorta.cluster.plugins.module_utils import _timeline

try:  # optional, faster decoding
    import msgspec
except ImportError:  # pragma: no cover - exercised on nodes without msgspec
    msgspec = None  # type: ignore[assignment]

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GRAPH_LAUNCHES = frozenset(("cudaGraphLaunch", "hipGraphLaunch"))
COMM_KERNEL_MARKS = ("nccl", "rccl", "cross_device_reduce")  # substrings, as TraceLens matches them
MEMCPY_KERNEL_PREFIXES = ("MEMORY_COPY_", "__amd_rocclr_copyBuffer")
TIMELINE_ROWS = (
    "computation_time",
    "exposed_comm_time",
    "exposed_memcpy_time",
    "busy_time",
    "idle_time",
    "total_time",
    "total_comm_time",
    "total_memcpy_time",
)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_CPU_COMM = re.compile(r"^(gloo:|c10d::|nccl:|record_param_comms$)")
KERNEL_CATEGORIES = (
    ("communication", re.compile(r"nccl|rccl|mscclkernel|cross_device_reduce", re.I)),
    ("GEMM", re.compile(r"gemm|Cijk_|cutlass|matmul|_mm_|addmm|\bmm\b|bmm|hipblaslt|sgemm|wvSplitK", re.I)),
    ("conv", re.compile(r"conv|winograd|implicit_gemm|miopen.*(fwd|bwd)|igemm", re.I)),
    ("normalization", re.compile(r"norm|batch_norm|layer_norm|rms", re.I)),
    ("reduce", re.compile(r"reduce|softmax|sum_|_sum|argmax|max_|mean", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|fill|copy|add|mul|relu|gelu|silu", re.I)),
)


class TraceFileError(Exception):
    """One trace file cannot be analysed; the message names the file and says why."""


if msgspec is not None:

    class _Event(msgspec.Struct, omit_defaults=True):
        # name and args stay raw bytes until an event that matters needs them: most events of a
        # big trace (python_function, cpu_instant_event) never do, and a str per name costs RAM.
        ph: str = ""
        cat: str = ""
        name: msgspec.Raw = msgspec.Raw(b'""')
        ts: float = 0.0
        dur: float = 0.0
        pid: object = None
        tid: object = None
        id: object = None
        args: msgspec.Raw = msgspec.Raw(b"{}")

    class _Outline(msgspec.Struct):
        # Each event kept as its raw bytes: decoded a batch at a time, so the decoded events of
        # a multi-GB trace never all exist at once.
        traceEvents: msgspec.Raw = msgspec.Raw(b"[]")
        distributedInfo: object = None
        deviceProperties: object = None
        baseTimeNanoseconds: object = None

    _EVENTS_DECODER = msgspec.json.Decoder(_Outline)
    _BATCH_DECODER = msgspec.json.Decoder(list[_Event])
    _ARGS_DECODER = msgspec.json.Decoder(dict)
    _NAME_DECODER = msgspec.json.Decoder(str)
else:  # pragma: no cover - the standard-library path decodes every field up front
    _EVENTS_DECODER = _BATCH_DECODER = _ARGS_DECODER = _NAME_DECODER = None
_CHUNK_BYTES = 16 << 20  # about 16 MB of events decoded at a time


def _read(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                return handle.read()
        with open(path, "rb") as handle:
            return handle.read()
    except (OSError, EOFError) as exc:
        raise TraceFileError(f"{path}: cannot read ({exc})") from None


class _Plain:
    """An event decoded by the standard library, with the attribute names of the msgspec struct."""

    __slots__ = ("args", "cat", "dur", "id", "name", "ph", "pid", "tid", "ts")

    def __init__(self, raw: dict) -> None:
        self.ph = raw.get("ph", "")
        self.cat = raw.get("cat", "")
        self.name = raw.get("name", "")
        self.ts = raw.get("ts", 0.0)
        self.dur = raw.get("dur", 0.0)
        self.pid = raw.get("pid")
        self.tid = raw.get("tid")
        self.id = raw.get("id")
        self.args = raw.get("args") or {}


def load(path: str):
    """Decode a trace: (events, distributedInfo, deviceProperties, baseTimeNanoseconds). Every
    failure names the file."""
    data = _read(path)
    if not data.strip():
        raise TraceFileError(f"{path}: empty file")
    if msgspec is not None:
        try:
            outline = _EVENTS_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFileError(f"{path}: not a Kineto trace: {_short(exc)}") from None
        array = outline.traceEvents
        first = data.find(b"[", data.find(b'"traceEvents"'))
        last = first + len(array) - 1
        if first < 0 or data[last : last + 1] != b"]" or data[first : first + 64] != memoryview(array)[:64].tobytes():
            # Not where a Kineto writer puts it: decode the raw array on its own.
            data, first, last = bytes(array), 0, len(array) - 1
        return (
            _batched(path, data, first, last),
            outline.distributedInfo,
            outline.deviceProperties,
            outline.baseTimeNanoseconds,
        )
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceFileError(f"{path}: not a Kineto trace: {_short(exc)}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("traceEvents", []), list):
        raise TraceFileError(f"{path}: not a Kineto trace: no traceEvents array")
    events = [_Plain(e) for e in raw.get("traceEvents", []) if isinstance(e, dict)]
    return events, raw.get("distributedInfo"), raw.get("deviceProperties"), raw.get("baseTimeNanoseconds")


def _batched(path: str, data: bytes, first: int, last: int):
    """Events of the ``traceEvents`` array ``data[first:last + 1]``, decoded about ``_CHUNK_BYTES`` at a time.

    The array is cut after a ``}`` followed by ``,``; a cut that falls inside a string makes the
    piece fail to decode, and the cut moves on to the next candidate.
    """
    view = memoryview(data)
    pos = first + 1  # after [
    while pos < last:
        cut = min(pos + _CHUNK_BYTES, last)
        while True:
            if cut < last:
                found = data.find(b"},", cut, last)
                cut = last if found < 0 else found + 1
            piece = bytearray(b"[")
            piece += view[pos:cut]
            piece += b"]"
            try:
                events = _BATCH_DECODER.decode(piece)
                break
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                if cut >= last:
                    raise TraceFileError(f"{path}: not a Kineto trace: {_short(exc)}") from None
        del piece
        yield from events
        pos = cut + 1  # past the comma


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


def _decoded(event, field: str, decoder, empty):
    """A field msgspec left raw, decoded on first use and kept (events read by json are decoded already)."""
    value = getattr(event, field)
    if msgspec is None or not isinstance(value, msgspec.Raw):
        return value
    try:
        value = decoder.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        value = empty
    setattr(event, field, value)
    return value


def _name(event) -> str:
    return _decoded(event, "name", _NAME_DECODER, "")


def _args(event) -> dict:
    return _decoded(event, "args", _ARGS_DECODER, {})


def union(intervals) -> list:
    """Merged, sorted (start, end) intervals."""
    merged: list = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(intervals) -> float:
    return sum(end - start for start, end in intervals)


def subtract(a, b) -> list:
    """Parts of the merged intervals ``a`` not covered by the merged intervals ``b``."""
    out, j = [], 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            if cur >= end:
                break
            k += 1
        if cur < end:
            out.append([cur, end])
    return out


def intersect_length(a, b) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _clip(intervals, window) -> list:
    """Parts of merged ``intervals`` inside merged ``window``."""
    return subtract(intervals, subtract(union(intervals), window)) if window else intervals


_CATEGORY_MEMO: dict = {}  # kernel names repeat thousands of times; the regexes are the cost


def _is_comm(name: str) -> bool:
    return any(mark in name for mark in COMM_KERNEL_MARKS)


def kernel_category(name: str) -> str:
    category = _CATEGORY_MEMO.get(name)
    if category is None:
        category = next((c for c, pattern in KERNEL_CATEGORIES if pattern.search(name)), "other")
        if len(_CATEGORY_MEMO) < 100_000:
            _CATEGORY_MEMO[name] = category
    return category


def _stats(values) -> dict:
    if not values:
        return {"count": 0, "mean": None, "std": None, "min": None, "max": None}
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def analyse(path: str, include_unlinked_kernels: bool = False) -> dict:
    """Metrics of one trace file (times in milliseconds)."""
    events, dist_info, _devices, base_ns = load(path)
    annotations, event_count = [], 0
    launch_corr, graph_corr, flow_start, flow_end, gpu = set(), set(), set(), {}, []
    steps, step_numbers, cpu_comm, cpu_ops, collectives_cpu, collective_names = [], {}, [], [], [], []
    # The hot loop over every event: bound methods and sets, no attribute lookups it can avoid.
    gpu_cats, launch_cats, cpu_cats = (
        frozenset(GPU_CATS),
        frozenset(LAUNCH_CATS),
        frozenset(("user_annotation", "cpu_op")),
    )
    step_match, comm_match = _STEP.match, _CPU_COMM.match
    for event in events:
        event_count += 1
        cat = event.cat
        if event.ph == "X":
            if cat in cpu_cats:
                name = _name(event)
                span = (event.ts, event.ts + event.dur)
                if cat == "user_annotation" and step_match(name):
                    steps.append(span)
                    step_numbers[span] = int(name[len("ProfilerStep#") :])
                elif comm_match(name):
                    cpu_comm.append(span)
                    if name.startswith(("gloo:", "nccl:")):  # one per collective (c10d:: ops nest inside)
                        collectives_cpu.append(span)
                        collective_names.append((name, span))
                else:  # aten ops and record_function ranges (forward, optimizer step, ...)
                    cpu_ops.append(span)
                    if cat == "user_annotation":
                        annotations.append((name, span))
            elif cat in gpu_cats:
                _name(event)  # decoded now: the raw field would keep its whole batch in memory
                _args(event)
                gpu.append(event)
            elif cat in launch_cats:
                corr = _args(event).get("correlation")
                if corr is not None:
                    launch_corr.add(corr)
                    if _name(event) in GRAPH_LAUNCHES:
                        graph_corr.add(corr)
        elif cat == "ac2g":
            if event.ph == "s":
                flow_start.add(event.id)
            elif event.ph == "f":
                flow_end[event.id] = (event.pid, event.tid)

    comp: list = []
    comm: list = []
    memcpy: list = []
    categories: dict = {}
    collectives: dict = {}
    # The timeline shows every GPU event, linked or not; each event is named and classed once here.
    gpu_collectives, gpu_activity = [], []
    for event in gpu:
        span = (event.ts, event.ts + event.dur)
        name = _name(event)
        comm_kernel = event.cat == "kernel" and _is_comm(name)
        if comm_kernel:
            gpu_collectives.append((name, span))
        else:
            gpu_activity.append((name, span, event.tid))
        if not include_unlinked_kernels:
            corr = _args(event).get("correlation")
            linked = corr in graph_corr or (
                corr in launch_corr and corr in flow_start and flow_end.get(corr) == (event.pid, event.tid)
            )
            if not linked:
                continue
        if event.cat == "gpu_memcpy" or (event.cat == "kernel" and name.startswith(MEMCPY_KERNEL_PREFIXES)):
            memcpy.append(span)
            categories["memcpy"] = categories.get("memcpy", 0.0) + event.dur
            continue
        if comm_kernel:
            comm.append(span)
            args = _args(event)
            key = args.get("Collective name") or name.split("(")[0]
            item = collectives.setdefault(key, {"count": 0, "time_ms": 0.0, "bytes": 0})
            item["count"] += 1
            item["time_ms"] += event.dur / 1000.0
            nelems = args.get("In msg nelems")
            if isinstance(nelems, int):
                item["bytes"] += nelems * _dtype_size(args.get("dtype"))
        else:
            comp.append(span)
        cat_name = "other" if event.cat == "gpu_memset" else kernel_category(name)
        categories[cat_name] = categories.get(cat_name, 0.0) + event.dur

    result = {
        "file": path,
        "rank": dist_info.get("rank") if isinstance(dist_info, dict) else None,
        "world_size": dist_info.get("world_size") if isinstance(dist_info, dict) else None,
        "gpu": bool(comp or comm or memcpy),
        "gpu_timeline": None,
        "kernel_time_by_category_ms": {k: v / 1000.0 for k, v in sorted(categories.items())},
        "collectives": {k: dict(v, time_ms=round(v["time_ms"], 6)) for k, v in sorted(collectives.items())},
    }
    comp_u = union(comp)  # merged once: the timeline figures and the per-step evidence both use it
    if result["gpu"]:
        result["gpu_timeline"] = _gpu_timeline(comp_u, comm, memcpy)

    step_durations = [(end - start) / 1000.0 for start, end in sorted(steps)]
    # The profiler's last ProfilerStep#N is opened by the final step() and closed at export: a
    # sliver, not a training step. Counted, it halves a short run's mean and swamps its spread.
    full = step_durations
    if len(step_durations) > 2 and step_durations[-1] < PARTIAL_STEP * statistics.median(step_durations[:-1]):
        full = step_durations[:-1]
    result["iterations"] = _stats(full)
    result["partial_steps"] = len(step_durations) - len(full)
    result.update(_per_step_evidence(result, steps, step_numbers, comp_u, comm, cpu_ops, cpu_comm, collectives_cpu))
    result["timeline"] = _timeline.select(
        event_count,
        base_ns,
        [(f"ProfilerStep#{step_numbers[span]}", span) for span in steps],
        gpu_collectives if result["gpu"] else collective_names,
        gpu_activity if result["gpu"] else [(name, span, "cpu") for name, span in annotations],
    )
    result.update(_cpu_or_gpu_ratios(result, steps, cpu_comm, cpu_ops))
    return result


def _length_within(merged, starts, low, high) -> float:
    """Length of sorted, merged ``merged`` (``starts`` its start points) inside [low, high]."""
    total = 0.0
    i = max(bisect.bisect_right(starts, low) - 1, 0)
    while i < len(merged) and merged[i][0] < high:
        start, end = merged[i]
        total += max(0.0, min(end, high) - max(start, low))
        i += 1
    return total


PARTIAL_STEP = 0.5  # the last profiler step, under this share of the others' median, is the closing sliver
EVIDENCE_MAX = 4096  # per trace: enough steps and collectives for a test, bounded for summaries


def _per_step_evidence(result, steps, step_numbers, comp_u, comm, cpu_ops, cpu_comm, collectives_cpu) -> dict:
    """What the straggler test compares across ranks: the computation inside each profiled step
    (by step number, the same on every rank) and each collective's duration, in order (the rank
    that arrives last at a collective waits least in it)."""
    if result["gpu"]:
        compute_u, collectives = comp_u, sorted(comm)
    else:
        compute_u, collectives = subtract(union(cpu_ops), union(cpu_comm)), sorted(collectives_cpu)
    starts = [start for start, _end in compute_u]
    per_step = []
    for span in sorted(steps)[:EVIDENCE_MAX]:
        per_step.append([step_numbers[span], round(_length_within(compute_u, starts, *span) / 1000.0, 6)])
    waits = [round((end - start) / 1000.0, 6) for start, end in collectives[:EVIDENCE_MAX]]
    return {"step_compute_ms": per_step, "collective_ms": waits}


def _gpu_timeline(comp_u, comm, memcpy) -> dict:
    """TraceLens' gpu_timeline rows (ms); ``comp_u`` is the computation already merged."""
    comm_u, memcpy_u = union(comm), union(memcpy)
    everything = union(comp_u + comm_u + memcpy_u)
    start, end = everything[0][0], everything[-1][1]
    busy = length(everything)
    exposed_comm = length(subtract(comm_u, comp_u))
    exposed_memcpy = length(subtract(memcpy_u, union(comp_u + comm_u)))
    micro = {
        "computation_time": length(comp_u),
        "exposed_comm_time": exposed_comm,
        "exposed_memcpy_time": exposed_memcpy,
        "busy_time": busy,
        "idle_time": (end - start) - busy,
        "total_time": end - start,
        "total_comm_time": length(comm_u),
        "total_memcpy_time": length(memcpy_u),
    }
    return {row: micro[row] / 1000.0 for row in TIMELINE_ROWS}


def _cpu_or_gpu_ratios(result, steps, cpu_comm, cpu_ops) -> dict:
    """compute/communication/overlap for any trace; CPU intervals when there is no GPU activity."""
    timeline = result["gpu_timeline"]
    if timeline:
        total, compute = timeline["total_time"], timeline["computation_time"]
        comm, exposed = timeline["total_comm_time"], timeline["exposed_comm_time"]
    else:
        # No GPU: the profiled steps are the window; communication is gloo/c10d time inside it,
        # computation the other CPU ops; exposed communication is the part no op overlaps.
        window = union(steps) or union(cpu_ops + cpu_comm)
        total = length(window) / 1000.0
        comm_u = _clip(union(cpu_comm), window)
        ops_u = _clip(union(cpu_ops), window)
        compute = length(subtract(ops_u, comm_u)) / 1000.0
        comm = length(comm_u) / 1000.0
        exposed = max(comm - intersect_length(comm_u, ops_u) / 1000.0, 0.0) if comm else 0.0
    iterations = max(result["iterations"]["count"], 1)
    return {
        "total_time_ms": total,
        "compute_time_ms": compute,
        "comm_time_ms": comm,
        "exposed_comm_time_ms": exposed,
        "compute_ratio": compute / total if total else 0.0,
        "comm_ratio": comm / total if total else 0.0,
        "overlap_ratio": (comm - exposed) / comm if comm else 0.0,
        "compute_per_iteration_ms": compute / iterations,
        "comm_wait_per_iteration_ms": exposed / iterations,
    }


def _dtype_size(dtype) -> int:
    return {
        "Float": 4,
        "float": 4,
        "BFloat16": 2,
        "Half": 2,
        "Double": 8,
        "Int": 4,
        "Long": 8,
        "Byte": 1,
        "Char": 1,
        "Bool": 1,
    }.get(str(dtype), 0)


def safe_analyse(path: str, include_unlinked_kernels: bool = False) -> dict:
    """``analyse`` that turns any failure into ``{"file": path, "error": ...}``, so one bad file
    never stops the others."""
    try:
        return analyse(path, include_unlinked_kernels)
    except TraceFileError as exc:
        return {"file": path, "error": str(exc)}
    except (ValueError, TypeError, KeyError, OverflowError, AttributeError, RecursionError, MemoryError) as exc:
        return {"file": path, "error": f"{path}: cannot analyse: {type(exc).__name__}: {_short(exc)}"}


def find_traces(root: str) -> list:
    """Trace files under ``root`` (``*.json``, ``*.json.gz``, ``*.pt.trace.json``), sorted; not the manifest."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name == "manifest.json" or not name.endswith((".json", ".json.gz")):
                continue
            found.append(os.path.join(dirpath, name))
    return sorted(found)


def analyse_all(paths, include_unlinked_kernels=False, max_workers=None) -> list:
    """Per-file summaries, in a bounded process pool (files are independent; decoding is CPU-bound)."""
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(paths) or 1))
    if workers == 1:
        return [safe_analyse(p, include_unlinked_kernels) for p in paths]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(safe_analyse, paths, [include_unlinked_kernels] * len(paths)))
