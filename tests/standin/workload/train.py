# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN for Aorta's train.py: same command line and output contract, CPU + gloo, tiny model.

Aorta itself refuses to start without a GPU. This stand-in lets the collection be tested for real
(torchrun rendezvous across nodes, torch.profiler traces) on machines without one:

  train.py --config FILE.yaml [--override k=v ...] [--enable-rocm-metrics]

Writes, under training.output_dir (relative to the working directory):
  torch_profiler/rank<global_rank>/trace.json  (or trace_step<N>.json when active>1 or repeat!=1;
      profiling.chrome_trace, default true), and with profiling.tensorboard (default false)
      <host>_<pid>.<time_ns>.pt.trace.json first. As in Aorta, with both on (Aorta's
      config/distributed.yaml and the stand-in's config) the Chrome export then fails, torch saving a
      profiler's trace once ("Trace is already saved."): only the .pt.trace.json file is written
  rank<r>.log, rank_<rr>_metrics.jsonl

SIGTERM/SIGINT stop it after the current step; the trace is still exported.
Fault knobs (overrides), for reliability tests:
  standin.hang_rank=R     rank R blocks forever in a p2p receive nobody sends; the others then wait
                          in the next all-reduce
  standin.fail_rank=R     rank R raises RuntimeError after step standin.fail_step (default 1), before
                          exporting its trace

  standin.slow_rank=R, standin.slow_factor=F   rank R computes F times longer (a straggler)
  standin.echo_overrides=true   log every override value exactly as received
A node's own fault (not a run's: it follows the machine whatever rank the node gets), from
standin-node.json in the working directory (the node's Aorta checkout, which the launch mounts
there), written by ``standin.py slow --node I --factor F`` (``make standin-slow``):
  {"compute_factor": F}   every rank on the node computes F times longer (a slow node)

Flight recorder: torch's NCCL watchdog dumps the recorder when a byte is written to
``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe``; torch's gloo has no such trigger. The stand-in
serves that same pipe for gloo (a thread of its own, see serve_dump_pipe), so the collection's
capture works the same way on the stand-in as on real Aorta over RCCL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from torch import nn
from torch.nn.parallel import DistributedDataParallel

STOP = {"requested": False}


NODE_KNOBS = "standin-node.json"  # the node's own fault knobs, in the working directory


def node_factor() -> float:
    """The node's compute factor (standin-node.json's compute_factor, 1 without the file)."""
    try:
        with open(NODE_KNOBS, encoding="utf-8") as handle:
            factor = float(json.load(handle).get("compute_factor", 1.0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 1.0
    if factor != 1.0:
        logging.getLogger("aorta.standin").info("stand-in fault: this node computes %.2fx longer", factor)
    return factor if factor > 0 else 1.0


def coerce(value: str):
    """Aorta's merge_cli_overrides coercion: bool, int, float, [a,b] (strings), else string."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    if value.startswith("[") and value.endswith("]"):
        return [item.strip() for item in value[1:-1].split(",") if item.strip()]
    return value


def merge_overrides(config: dict, tokens: list[str] | None) -> dict:
    for token in tokens or []:
        if "=" not in token:
            raise SystemExit(f"ConfigError: override {token!r} is not key=value")
        key, raw = token.split("=", 1)
        node = config
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = coerce(raw)
    return config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Aorta stand-in (CPU, gloo)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--override", type=str, nargs="*", default=None)
    parser.add_argument("--enable-rocm-metrics", action="store_true")
    return parser.parse_args(argv)


def setup_logging(output_dir: Path, rank: int) -> logging.Logger:
    logger = logging.getLogger("aorta.standin")
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(output_dir / f"rank{rank}.log", mode="a")
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
    logger.addHandler(handler)
    if rank == 0:
        logger.addHandler(logging.StreamHandler(sys.stderr))
    return logger


def serve_dump_pipe(rank: int) -> None:
    """STAND-IN for torch's NCCL DumpPipe (ProcessGroupNCCL.cpp), which gloo lacks: create
    ``<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe`` and, for every write to it, write the flight
    recorder's pickle to ``<TORCH_FR_DUMP_TEMP_FILE or TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>``,
    as torch does. Off unless the pipe variable and a buffer size > 0 are set, as in torch."""
    stem = os.environ.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
    size = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
    if not stem or int(size) <= 0:
        return
    dump_stem = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/tmp/nccl_trace_rank_"
    )
    pipe = f"{stem}{rank}.pipe"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(pipe)
    os.mkfifo(pipe)

    def serve() -> None:
        while True:
            with open(pipe, "rb") as trigger:  # blocks (without the GIL) until a writer comes
                if not trigger.read(1):
                    continue
            data = torch._C._distributed_c10d._dump_fr_trace(True, True, False)
            partial = f"{dump_stem}{rank}.tmp"
            with open(partial, "wb") as out:
                out.write(data)
            os.replace(partial, f"{dump_stem}{rank}")

    threading.Thread(target=serve, name="standin-dump-pipe", daemon=True).start()


def on_signal(signum, _frame):
    STOP["requested"] = True


def main(argv=None) -> int:
    args = parse_args(argv)
    with open(args.config) as handle:
        config = yaml.safe_load(handle) or {}
    config = merge_overrides(config, args.override)
    training = config.setdefault("training", {})
    profiling = config.setdefault("profiling", {})
    standin = config.get("standin", {})

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    serve_dump_pipe(rank)
    output_dir = Path(training.get("output_dir", "artifacts"))
    (output_dir / "torch_profiler" / f"rank{rank}").mkdir(parents=True, exist_ok=True)
    log = setup_logging(output_dir, rank)
    log.info(
        "Initialised distributed training | backend=gloo rank=%d world=%d local_rank=%s device=cpu host=%s",
        rank,
        world,
        os.environ.get("LOCAL_RANK"),
        socket.gethostname(),
    )
    if standin.get("echo_overrides"):
        log.info("overrides %s", json.dumps(args.override))
    if args.enable_rocm_metrics:
        log.info("--enable-rocm-metrics accepted (stand-in: no GPU metrics to collect)")

    torch.manual_seed(int(config.get("dataset", {}).get("seed", 0)) + rank)
    torch.set_num_threads(1)
    width = int(config.get("model", {}).get("model_dim", 64))
    model = DistributedDataParallel(nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(config.get("optimizer", {}).get("lr", 0.01)))
    batch = int(training.get("batch_size", 8))

    wait, warmup = int(profiling.get("wait", 1)), int(profiling.get("warmup", 1))
    active, repeat = int(profiling.get("active", 2)), int(profiling.get("repeat", 1))
    max_steps = int(training.get("max_steps") or (wait + warmup + active) * max(repeat, 1))
    log.info(
        "Enabling torch profiler | rank=%d wait=%d warmup=%d active=%d repeat=%d", rank, wait, warmup, active, repeat
    )

    trace_dir = output_dir / "torch_profiler" / f"rank{rank}"
    stem, ext = os.path.splitext(profiling.get("trace_filename", "trace.json"))
    metrics_path = output_dir / f"rank_{rank:02d}_metrics.jsonl"
    slow_rank = standin.get("slow_rank")
    slow_factor = float(standin.get("slow_factor", 1.0))
    compute_ms = float(standin.get("compute_ms", 5.0)) * node_factor()

    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
        record_shapes=bool(profiling.get("record_shapes", True)),
    )
    step = 0
    with profiler:
        while step < max_steps and not STOP["requested"]:
            start = time.perf_counter()
            inputs, target = torch.randn(batch, width), torch.randn(batch, 1)
            loss = nn.functional.mse_loss(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces gradients over gloo here
            optimizer.step()
            # The stand-in's "GPU compute": a fixed wait, longer on the straggler. A sleep, not a busy
            # loop: a GPU kernel leaves the host thread idle, and a busy loop on a shared machine is
            # stretched by the scheduler at random, which reads as stragglers that are not there.
            busy = compute_ms * (slow_factor if slow_rank is not None and int(slow_rank) == rank else 1.0)
            with torch.profiler.record_function("standin_compute"):
                time.sleep(busy / 1000.0)
            if standin.get("hang_rank") is not None and int(standin["hang_rank"]) == rank:
                log.info("stand-in fault: rank %d hangs in a collective", rank)
                dist.recv(torch.zeros(1), src=(rank + 1) % world)  # never sent: blocks for good
            step += 1
            profiler.step()
            with open(metrics_path, "a") as metrics:
                metrics.write(
                    json.dumps(
                        {
                            "rank": rank,
                            "world_size": world,
                            "step": step,
                            "global_step": step,
                            "loss": loss.item(),
                            "profile": {"total_ms": (time.perf_counter() - start) * 1000.0},
                        }
                    )
                    + "\n"
                )
            fail_step = int(standin.get("fail_step", 1))
            if standin.get("fail_rank") is not None and int(standin["fail_rank"]) == rank and step >= fail_step:
                raise RuntimeError(f"stand-in fault: rank {rank} fails after step {step}")
    # As Aorta's fsdp_trainer.py does after its loop: TensorBoard's file, then the Chrome trace, both
    # from the same profiler (profiling.tensorboard default false, chrome_trace default true;
    # Aorta's config/distributed.yaml and the stand-in's config turn both on: the pair).
    if bool(profiling.get("tensorboard", False)):
        try:
            torch.profiler.tensorboard_trace_handler(str(trace_dir))(profiler)  # <host>_<pid>.<ns>.pt.trace.json
        except (RuntimeError, AssertionError, AttributeError) as exc:  # stopped before the active window
            log.warning("TensorBoard trace export failed: %s", exc)
    if bool(profiling.get("chrome_trace", True)):
        if not ext:
            ext = ".json"
        name = f"{stem}{ext}" if active == 1 and repeat == 1 else f"{stem}_step{profiler.step_num}{ext}"
        try:
            profiler.export_chrome_trace(str(trace_dir / name))
            log.info("Exported chrome trace to %s", trace_dir / name)
        except (RuntimeError, AssertionError, AttributeError) as exc:
            # Stopped before the active window; or, after TensorBoard's export, torch's "Trace is
            # already saved." (a profiler's trace is saved once): then, as in Aorta, only the
            # .pt.trace.json file is there.
            log.warning("Chrome trace export failed: %s", exc)
    log.info("done | rank=%d steps=%d stopped_by_signal=%s", rank, step, STOP["requested"])
    if not STOP["requested"]:
        dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
