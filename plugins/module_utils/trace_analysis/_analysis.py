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
import gc
import heapq
import os
import re
import statistics
from concurrent.futures import ProcessPoolExecutor

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _timeline
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._decode import (
    NotATrace,
    OutlineGuessWrong,
    TraceFileError,
    load,
    short_error,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._intervals import (
    clip,
    intersect_length,
    length,
    subtract,
    union,
)
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._layout import aorta_pairs
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import find_new_files

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
    # The cyclic collector would walk every object made here again and again as they pile up;
    # nothing here makes a cycle.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            return _metrics(path, include_unlinked_kernels, exact=False)
        except OutlineGuessWrong:  # an array follows the events in this file: read its outline exactly
            return _metrics(path, include_unlinked_kernels, exact=True)
    finally:
        if collecting:
            gc.enable()


_CPU_CATS = frozenset(("user_annotation", "cpu_op"))
_GPU_CATS = frozenset(GPU_CATS)
_LAUNCH_CATS = frozenset(LAUNCH_CATS)
_RELEVANT_CATS = _CPU_CATS | _GPU_CATS | _LAUNCH_CATS | {"ac2g"}
# How a CPU event's name classes it (ordered: the two communication kinds last); names repeat
# thousands of times, the regexes are the cost.
_OP_NAME, _STEP_NAME, _COMM_NAME, _COLLECTIVE_NAME = range(4)


def _cpu_kind(name: str, annotation: bool) -> int:
    if annotation and _STEP.match(name):
        return _STEP_NAME
    if _CPU_COMM.match(name):
        # One per collective (gloo:/nccl:); the c10d:: ops nest inside them.
        return _COLLECTIVE_NAME if name.startswith(("gloo:", "nccl:")) else _COMM_NAME
    return _OP_NAME


def _metrics(path: str, include_unlinked_kernels: bool, exact: bool) -> dict:
    """The metrics of one trace, read outline-guessed or ``exact``: the phases below in turn."""
    batches, dist_info, _devices, base_ns = load(path, exact=exact)
    event_count, cpu_events, gpu, links = _gather(batches)
    if not event_count:
        raise NotATrace(f"{path}: not a profiler trace (traceEvents holds no event), skipped")
    comp, comm, memcpy, categories, collectives, kernels, gpu_collectives, gpu_activity = _gpu_figures(
        gpu, links, include_unlinked_kernels
    )

    # A GPU trace needs only the profiler steps of its CPU ranges; a CPU-only one needs them all.
    cpu = _cpu_ranges(cpu_events, steps_only=bool(comp or comm or memcpy))
    steps, step_numbers = cpu["steps"], cpu["step_numbers"]
    cpu_ops, cpu_comm, collectives_cpu = cpu["ops"], cpu["comm"], cpu["collectives"]
    result = {
        "file": path,
        "rank": dist_info.get("rank") if isinstance(dist_info, dict) else None,
        "world_size": dist_info.get("world_size") if isinstance(dist_info, dict) else None,
        "gpu": bool(comp or comm or memcpy),
        "gpu_timeline": None,
        "kernel_time_by_category_ms": {k: v / 1000.0 for k, v in sorted(categories.items())},
        "collectives": {k: dict(v, time_ms=round(v["time_ms"], 6)) for k, v in sorted(collectives.items())},
        # The longest GPU events by name: [name, count, total ms], at most TOP_KERNELS.
        "top_kernels": [
            [n, c, round(t / 1000.0, 6)] for n, (c, t) in heapq.nlargest(TOP_KERNELS, kernels.items(), key=_by_time)
        ],
    }
    comp_u = union(comp)  # merged once: the timeline figures and the per-step evidence both use it
    if result["gpu"]:
        result["gpu_timeline"] = _gpu_timeline(comp_u, comm, memcpy)

    result["iterations"], result["partial_steps"] = _iterations(steps)
    result.update(_per_step_evidence(result, steps, step_numbers, comp_u, comm, cpu_ops, cpu_comm, collectives_cpu))
    result["timeline"] = _timeline.select(
        event_count,
        base_ns,
        [(f"ProfilerStep#{step_numbers[span]}", span) for span in steps],
        gpu_collectives if result["gpu"] else cpu["collective_names"],
        gpu_activity if result["gpu"] else [(name, span, "cpu") for name, span in cpu["annotations"]],
    )
    result.update(_cpu_or_gpu_ratios(result, steps, cpu_comm, cpu_ops))
    return result


def _gather(batches) -> tuple:
    """(event count, CPU events, GPU events, links) from every batch of the trace, in one pass;
    links are (launch correlations, graph-launch correlations, ac2g flow start ids, flow end id ->
    (pid, tid)), what tells a GPU event its launch."""
    event_count, cpu_events, gpu = 0, [], []
    launch_corr, graph_corr, flow_start, flow_end = set(), set(), set(), {}
    relevant_cats, cpu_cats, gpu_cats = _RELEVANT_CATS, _CPU_CATS, _GPU_CATS  # locals: the loop's lookups
    for batch in batches:
        event_count += len(batch)
        # Most events of a big trace (python_function) matter to nothing here: one comprehension
        # drops them before the loop that looks at each event (measured: twice as fast as a
        # comprehension per kind of event).
        for event in [e for e in batch if e.cat in relevant_cats]:
            cat = event.cat
            if event.ph == "X":
                if cat in cpu_cats:  # classed once the trace is known to be GPU or CPU only
                    cpu_events.append(event)
                elif cat in gpu_cats:
                    gpu.append(event)
                else:  # a launch
                    corr = event.args.correlation
                    if corr is not None:
                        launch_corr.add(corr)
                        if event.name in GRAPH_LAUNCHES:
                            graph_corr.add(corr)
            elif cat == "ac2g":
                if event.ph == "s":
                    flow_start.add(event.id)
                elif event.ph == "f":
                    flow_end[event.id] = (event.pid, event.tid)
    return event_count, cpu_events, gpu, (launch_corr, graph_corr, flow_start, flow_end)


def _gpu_figures(gpu, links, include_unlinked_kernels: bool) -> tuple:
    """(computation, communication and memcpy spans, time by category, collectives, kernels by
    name, the timeline's collectives and activity) of the GPU events; only those ``links``
    (_gather's) ties to a launch count unless ``include_unlinked_kernels``. One loop over the
    events, each named and classed once: no call per event but for a kernel name seen first."""
    launch_corr, graph_corr, flow_start, flow_end = links
    comp: list = []
    comm: list = []
    memcpy: list = []
    categories: dict = {}
    collectives: dict = {}
    kernels: dict = {}  # per name of every counted GPU event: [count, total us]
    # The timeline shows every GPU event, linked or not; each event is named and classed once here.
    gpu_collectives, gpu_activity = [], []
    traits: dict = {}  # per kernel name: (communication, a copy, category); names repeat
    for event in gpu:
        span = (event.ts, event.ts + event.dur)
        name, cat = event.name, event.cat
        known = traits.get(name)
        if known is None:
            known = traits[name] = (_is_comm(name), name.startswith(MEMCPY_KERNEL_PREFIXES), kernel_category(name))
        comm_kernel = known[0] and cat == "kernel"
        if comm_kernel:
            gpu_collectives.append((name, span))
        else:
            gpu_activity.append((name, span, event.tid))
        if not include_unlinked_kernels:
            corr = event.args.correlation
            linked = corr in graph_corr or (
                corr in launch_corr and corr in flow_start and flow_end.get(corr) == (event.pid, event.tid)
            )
            if not linked:
                continue
        if cat == "gpu_memcpy" or (cat == "kernel" and known[1]):
            memcpy.append(span)
            categories["memcpy"] = categories.get("memcpy", 0.0) + event.dur
            continue
        kernel = kernels.get(name)
        if kernel is None:
            kernel = kernels[name] = [0, 0.0]
        kernel[0] += 1
        kernel[1] += event.dur
        if comm_kernel:
            comm.append(span)
            args = event.args
            key = args.collective_name or name.split("(")[0]
            item = collectives.setdefault(key, {"count": 0, "time_ms": 0.0, "bytes": 0, "by_size": {}})
            item["count"] += 1
            item["time_ms"] += event.dur / 1000.0
            nelems = args.in_msg_nelems
            if isinstance(nelems, int):
                item["bytes"] += nelems * _dtype_size(args.dtype)
                # nccl-tests' size: the larger buffer (all_gather's output, reduce_scatter's input).
                out = args.out_msg_nelems if isinstance(args.out_msg_nelems, int) else nelems
                size = f"{max(nelems, out) * _dtype_size(args.dtype)}/{args.group_size or ''}"
                per_size = item["by_size"].setdefault(size, [0, 0.0])
                per_size[0] += 1
                per_size[1] += event.dur
        else:
            comp.append(span)
        cat_name = "other" if cat == "gpu_memset" else known[2]
        categories[cat_name] = categories.get(cat_name, 0.0) + event.dur
    return comp, comm, memcpy, categories, collectives, kernels, gpu_collectives, gpu_activity


def _iterations(steps) -> tuple:
    """(the statistics of the full profiler steps' durations in ms, how many partial steps were left out)."""
    step_durations = [(end - start) / 1000.0 for start, end in sorted(steps)]
    # The profiler's last ProfilerStep#N is opened by the final step() and closed at export: a
    # sliver, not a training step. Counted, it halves a short run's mean and swamps its spread.
    full = step_durations
    if len(step_durations) > 2 and step_durations[-1] < PARTIAL_STEP * statistics.median(step_durations[:-1]):
        full = step_durations[:-1]
    return _stats(full), len(step_durations) - len(full)


def _cpu_ranges(events, steps_only: bool) -> dict:
    """The CPU ranges of ``events`` (cpu_op and user_annotation, in trace order), as (start, end):
    profiler steps (by span, with their numbers), ops, communication, one per collective (and its
    name) and the user annotations that are ops; with ``steps_only``, the steps alone."""
    steps, step_numbers, ops, comm, collectives, collective_names, annotations = [], {}, [], [], [], [], []
    op_kinds: dict = {}  # how each cpu_op name and each user_annotation name classes; names repeat
    annotation_kinds: dict = {}
    for event in events:
        annotation = event.cat == "user_annotation"
        if steps_only and not annotation:
            continue
        name = event.name
        known = annotation_kinds if annotation else op_kinds
        kind = known.get(name)
        if kind is None:
            kind = known[name] = _cpu_kind(name, annotation)
        span = (event.ts, event.ts + event.dur)
        if kind == _STEP_NAME:
            steps.append(span)
            step_numbers[span] = int(name[len("ProfilerStep#") :])
        elif steps_only:
            continue
        elif kind == _OP_NAME:  # aten ops and record_function ranges (forward, optimizer step, ...)
            ops.append(span)
            if annotation:
                annotations.append((name, span))
        else:
            comm.append(span)
            if kind == _COLLECTIVE_NAME:
                collectives.append(span)
                collective_names.append((name, span))
    return {
        "steps": steps,
        "step_numbers": step_numbers,
        "ops": ops,
        "comm": comm,
        "collectives": collectives,
        "collective_names": collective_names,
        "annotations": annotations,
    }


def _length_within(merged, starts, low, high) -> float:
    """Length of sorted, merged ``merged`` (``starts`` its start points) inside [low, high]."""
    total = 0.0
    i = max(bisect.bisect_right(starts, low) - 1, 0)
    while i < len(merged) and merged[i][0] < high:
        start, end = merged[i]
        total += max(0.0, min(end, high) - max(start, low))
        i += 1
    return total


TOP_KERNELS = 25  # per trace: what the report's top-kernels table can need, bounded for summaries


def _by_time(item) -> float:
    return item[1][1]


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
    except NotATrace as exc:
        return {"file": path, "skipped": str(exc)}
    except TraceFileError as exc:
        return {"file": path, "error": str(exc)}
    except (ValueError, TypeError, KeyError, OverflowError, AttributeError, RecursionError, MemoryError) as exc:
        return {"file": path, "error": f"{path}: cannot analyse: {type(exc).__name__}: {short_error(exc)}"}


def _trace_name(name: str) -> bool:
    return name != "manifest.json" and name.endswith((".json", ".json.gz"))


def find_traces(root: str) -> list:
    """Trace files under ``root`` (``*.json``, ``*.json.gz``, ``*.pt.trace.json``), sorted; not the
    manifest, nothing under a directory whose name starts with a dot."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found += [os.path.join(dirpath, name) for name in filenames if _trace_name(name)]
    return sorted(found)


def find_run_traces(root: str, since: float = 0.0) -> list:
    """The traces of a node's output directory ``root`` that the controller's combined_traces would
    hold and analyse (what trace_summary analyses there, so both routes to the report read the same
    traces): the files the run's collection takes (_traces.find_new_files: modified at or after
    ``since``, no symlink, nothing under combined_traces, .aorta-cluster or .git), then those
    ``find_traces`` reads in the combined tree (no dot directory, no manifest.json). Sorted."""
    found = []
    for rel in find_new_files(root, since):
        parts = rel.split(os.sep)
        if _trace_name(parts[-1]) and not any(part.startswith(".") for part in parts[:-1]):
            found.append(os.path.join(root, rel))
    return sorted(found)


def analyse_all(paths, include_unlinked_kernels=False, max_workers=None) -> list:
    """Per-file summaries, in a bounded process pool (files are independent; decoding is CPU-bound).

    The TensorBoard copy of Aorta's pair (_layout.aorta_pairs) is not analysed again: its summary
    is ``{"file", "paired_with"}``, the Chrome trace of the same window."""
    pairs = aorta_pairs(paths)
    todo = [p for p in paths if p not in pairs]
    paired = [{"file": copy, "paired_with": chrome} for copy, chrome in sorted(pairs.items())]
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(todo) or 1))
    if workers == 1:
        return [safe_analyse(p, include_unlinked_kernels) for p in todo] + paired
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(safe_analyse, todo, [include_unlinked_kernels] * len(todo))) + paired
