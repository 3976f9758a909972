# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-trace metrics from a Kineto (torch.profiler) Chrome trace, TraceLens-compatible.

Private to this collection. Standard library only, so the per-rank step can run on the nodes;
the trace is decoded by _decode (msgspec when installed) and the times are interval unions
(_intervals).

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
import os
import re
import statistics
from concurrent.futures import ProcessPoolExecutor

from ansible_collections.aorta.cluster.plugins.module_utils import _timeline
from ansible_collections.aorta.cluster.plugins.module_utils._decode import (
    TraceFileError,
    event_args,
    event_name,
    load,
    short_error,
)
from ansible_collections.aorta.cluster.plugins.module_utils._intervals import (
    clip,
    intersect_length,
    length,
    subtract,
    union,
)

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
                name = event_name(event)
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
                event_name(event)  # decoded now: the raw field would keep its whole batch in memory
                event_args(event)
                gpu.append(event)
            elif cat in launch_cats:
                corr = event_args(event).get("correlation")
                if corr is not None:
                    launch_corr.add(corr)
                    if event_name(event) in GRAPH_LAUNCHES:
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
        name = event_name(event)
        comm_kernel = event.cat == "kernel" and _is_comm(name)
        if comm_kernel:
            gpu_collectives.append((name, span))
        else:
            gpu_activity.append((name, span, event.tid))
        if not include_unlinked_kernels:
            corr = event_args(event).get("correlation")
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
            args = event_args(event)
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
        comm_u = clip(union(cpu_comm), window)
        ops_u = clip(union(cpu_ops), window)
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
        return {"file": path, "error": f"{path}: cannot analyse: {type(exc).__name__}: {short_error(exc)}"}


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
