"""Parse benchmark: our per-rank analysis vs merely decoding the same bytes with orjson.

Builds a trace of at least 200 MB by replicating a real MI300X fixture's events (shifted in time
so they do not overlap), then measures in this one run, each in a fresh process:
  ratio_vs_orjson  our analyse() wall time, reading the file included / orjson.loads wall time on the
                   same bytes already read (target <= 0.5)
  rss_ratio        our peak RSS / raw file size (target <= 1.5)
  rss_ratio_stdlib the same with msgspec disabled (_decode.msgspec = None: the json standard-library
                   decoder a node without msgspec uses); no target, measured for docs/scale.md
  seconds_stdlib   our analyse() wall time with msgspec disabled, reading the file included
  stdlib_slowdown  seconds_stdlib / our analyse() wall time with msgspec
  ranks_speedup    several rank files: sequential / bounded process pool of 2 (target >= 1.7 on 2 cores)
Last line: BENCH parse key=value ...
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "traces" / "mi300" / "resnet-act-checkpoint.json.gz"
TARGET_MB = float(os.environ.get("AORTA_BENCH_TRACE_MB", "200"))
PRELUDE = (
    "import sys, time, resource\n"
    "from ansible.plugins.loader import init_plugin_loader\n"
    f"init_plugin_loader([{str(REPO / '.collections')!r}])\n"
)


def build_trace(path: Path, target_mb: float) -> int:
    with gzip.open(FIXTURE) as handle:
        base = json.loads(handle.read())
    events = base["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(e.get("ts", 0) for e in events if "ts" in e)
    one = len(json.dumps(events))
    copies = int(target_mb * 1e6 / one) + 1
    with open(path, "w") as out:
        head = {k: v for k, v in base.items() if k != "traceEvents"}
        out.write(json.dumps(head)[:-1] + ', "traceEvents": [')
        for i in range(copies):
            shifted = []
            for original in events:
                e = dict(original)
                if "ts" in e:
                    e["ts"] = e["ts"] + i * (span + 1000)
                if "id" in e and isinstance(e["id"], int):
                    e["id"] = e["id"] + i * 10_000_000
                args = e.get("args")
                if isinstance(args, dict) and isinstance(args.get("correlation"), int):
                    e["args"] = dict(args, correlation=args["correlation"] + i * 10_000_000)
                shifted.append(e)
            out.write(("," if i else "") + json.dumps(shifted)[1:-1])
        out.write("]}")
    return path.stat().st_size


def run_child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def analyse_code(trace: Path, stdlib: bool) -> str:
    """A child's code: analyse() of one trace, its wall time and peak RSS; with ``stdlib`` msgspec is
    disabled first, as on a node without it (_decode falls back to the json standard library)."""
    return (
        "import json\n"
        "from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis, _decode\n"
        + ("_decode.msgspec = None\n" if stdlib else "")
        + "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        f"t = time.perf_counter(); r = _analysis.analyse({str(trace)!r}); el = time.perf_counter() - t\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'s': el, 'rss': peak, 'base': base, 'busy': r['gpu_timeline']['busy_time'], "
        "'decoder': 'json' if _decode.msgspec is None else 'msgspec'}))\n"
    )


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="aorta-bench-") as tmp:
        trace = Path(tmp) / "rank0_trace.json"
        size = build_trace(trace, TARGET_MB)
        orjson_run = run_child(
            "import orjson, json\n"
            f"data = open({str(trace)!r}, 'rb').read()\n"
            "t = time.perf_counter(); orjson.loads(data); el = time.perf_counter() - t\n"
            "print(json.dumps({'s': el, 'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))\n"
        )
        ours = run_child(analyse_code(trace, stdlib=False))
        stdlib = run_child(analyse_code(trace, stdlib=True))
        if (ours["decoder"], stdlib["decoder"]) != ("msgspec", "json"):
            raise SystemExit(f"decoders {ours['decoder']} / {stdlib['decoder']}: msgspec is not installed here")
        # Several ranks: four files of a quarter of the size each, sequential vs a pool of 2.
        quarter = []
        for i in range(4):
            path = Path(tmp) / f"rank{i}.json"
            build_trace(path, TARGET_MB / 4)
            quarter.append(str(path))
        pool = run_child(
            "import json\n"
            "from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis\n"
            f"paths = {quarter!r}\n"
            "t = time.perf_counter(); _analysis.analyse_all(paths, max_workers=1); seq = time.perf_counter() - t\n"
            "t = time.perf_counter(); _analysis.analyse_all(paths, max_workers=2); par = time.perf_counter() - t\n"
            "print(json.dumps({'seq': seq, 'par': par}))\n"
        )
    ratio = ours["s"] / orjson_run["s"]
    rss_ratio = (ours["rss"] - ours["base"]) / size
    speedup = pool["seq"] / pool["par"]
    rss_ratio_stdlib = (stdlib["rss"] - stdlib["base"]) / size
    slowdown = stdlib["s"] / ours["s"]
    print(
        f"trace {size / 1e6:.0f} MB: orjson.loads {orjson_run['s']:.2f}s (peak RSS {orjson_run['rss'] / 1e6:.0f} MB); "
        f"analyse {ours['s']:.2f}s (peak RSS {ours['rss'] / 1e6:.0f} MB, {ours['base'] / 1e6:.0f} MB before)"
    )
    print(
        f"analyse without msgspec (json standard library) {stdlib['s']:.2f}s "
        f"(peak RSS {stdlib['rss'] / 1e6:.0f} MB, {stdlib['base'] / 1e6:.0f} MB before); "
        f"GPU busy time {'the same' if stdlib['busy'] == ours['busy'] else 'DIFFERS'} both ways"
    )
    print(f"4 ranks x {size / 4e6:.0f} MB: sequential {pool['seq']:.2f}s, pool of 2 {pool['par']:.2f}s")
    print(
        f"BENCH parse ratio_vs_orjson={ratio:.2f} rss_ratio={rss_ratio:.2f} ranks_speedup={speedup:.2f} "
        f"rss_ratio_stdlib={rss_ratio_stdlib:.2f} seconds_stdlib={stdlib['s']:.2f} stdlib_slowdown={slowdown:.2f} "
        f"trace_mb={size / 1e6:.0f} targets=ratio<=0.5,rss<=1.5,speedup>=1.7"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
