"""Node-side analysis benchmark (issue 41): a node with 8 traces of 400 MB each analysed where they
lie, as aorta_collect_traces sample does (trace_summary with dest: the summaries and the list of
every file with its sha256, written to one gzip file), in a fresh process, one file at a time.

Baseline in the same run: one of those files analysed alone (analyse(), what the controller does per
file), in its own fresh process.
  node_s              the node's whole summary (8 files: analysis, hashing, listing, the file written)
  per_file_s          node_s / files
  overhead_ratio      node_s / (files x the baseline's seconds): what the summary adds to the analysis
  peak_ratio          the node's peak RSS over its start, per file size (target <= 1.5: one file at a time)
  peak_vs_one         that peak against the baseline's (about 1: files are analysed one at a time)
  summary_kb          the summary file's size
  stdlib_node_s, stdlib_peak_ratio   the same summary on a node without msgspec (the standard library's json)
Files: AORTA_BENCH_NODE_FILES (8) x AORTA_BENCH_NODE_FILE_MB (400); the traces are hard links of one
built file (the same bytes read 8 times: the analysis and the hashing cost the same).
Last line: BENCH node-analysis key=value ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse import PRELUDE, build_trace  # the parse bench's trace builder

FILES = int(os.environ.get("AORTA_BENCH_NODE_FILES", "8"))
FILE_MB = float(os.environ.get("AORTA_BENCH_NODE_FILE_MB", "400"))


def child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise_code(root: Path, dest: Path, stdlib: bool) -> str:
    return (
        "import json, os\n"
        "from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _decode, _node_summary\n"
        + ("_decode.msgspec = None\n" if stdlib else "")
        + "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        f"t = time.perf_counter(); kept = _node_summary.summarise({str(root)!r}, 0, {str(dest)!r})\n"
        "el = time.perf_counter() - t\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'s': el, 'rss': peak, 'base': base, 'kept': kept}))\n"
    )


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="aorta-bench-node-") as tmp:
        built = Path(tmp) / "built.json"
        size = build_trace(built, FILE_MB)
        root = Path(tmp) / "out"
        for rank in range(FILES):
            path = root / "torch_profiler" / f"rank{rank}" / "trace.json"
            path.parent.mkdir(parents=True)
            os.link(built, path)
        one = child(
            "import json\n"
            "from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _analysis\n"
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
            f"t = time.perf_counter(); _analysis.analyse({str(built)!r}); el = time.perf_counter() - t\n"
            "print(json.dumps({'s': el, 'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
            "'base': base}))\n"
        )
        node = child(summarise_code(root, Path(tmp) / "summary.json.gz", stdlib=False))
        stdlib = child(summarise_code(root, Path(tmp) / "summary-stdlib.json.gz", stdlib=True))
    if node["kept"]["decoder"] != "msgspec" or stdlib["kept"]["decoder"] != "json":
        raise SystemExit("msgspec is not installed here: the node's two decoders cannot be compared")
    peak = node["rss"] - node["base"]
    figures = {
        "files": FILES,
        "file_mb": round(size / 1e6),
        "node_s": round(node["s"], 2),
        "per_file_s": round(node["s"] / FILES, 2),
        "overhead_ratio": round(node["s"] / (FILES * one["s"]), 2),
        "peak_ratio": round(peak / size, 2),
        "peak_vs_one": round(peak / max(one["rss"] - one["base"], 1), 2),
        "summary_kb": round(node["kept"]["size"] / 1024, 1),
        "stdlib_node_s": round(stdlib["s"], 1),
        "stdlib_peak_ratio": round((stdlib["rss"] - stdlib["base"]) / size, 2),
        "baseline_one_file_s": round(one["s"], 2),
    }
    print(
        f"{FILES} x {size / 1e6:.0f} MB on one node: {node['s']:.1f} s with msgspec (one file alone {one['s']:.2f} s), "
        f"peak {peak / 1e6:.0f} MB; without msgspec {stdlib['s']:.1f} s, "
        f"peak {(stdlib['rss'] - stdlib['base']) / 1e6:.0f} MB; summary file {node['kept']['size'] / 1024:.0f} KB"
    )
    line = " ".join(f"{key}={value}" for key, value in figures.items())
    print(f"BENCH node-analysis {line} targets=peak_ratio<=1.5")
    return 0 if figures["peak_ratio"] <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
