# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure launch logic: master address, launch mode, torchrun argv, launch script (controller side).

Private to this collection. Everything here is a pure function so the decisions that broke the
upstream runner (wrong rendezvous address, several --override groups, shell-split values) are
pinned by unit tests.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

LAUNCH_MODES = ("auto", "script", "torchrun")
_NOT_SET = (None, "", "NA", "N/A", "na", "n/a")
# Aorta's dotted config keys; anything else is a typo or an injection attempt.
_OVERRIDE_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# $NAME or ${NAME}: the only shell syntax a launch-script environment value may use.
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class LaunchError(ValueError):
    """Invalid launch input; the message names the variable."""


def master_addr(override: Any, head_vpc_ip: Any, head_key: str) -> str:
    """Rendezvous address: explicit override, else the head's fabric address, else the head's key."""
    for candidate in (override, head_vpc_ip, head_key):
        if candidate not in _NOT_SET and str(candidate).strip():
            return str(candidate).strip()
    raise LaunchError("aorta_master_addr: no head address known (empty override, vpc_ip and node key)")


def launch_mode(mode: Any, nnodes: int, overrides: Any = None) -> str:
    """Resolve ``auto`` to ``script`` (one node without ``overrides``) or ``torchrun``; ``script`` on
    several nodes, or with overrides, is an error. Script mode runs the experiment script
    (aorta_experiment_script: Aorta's scripts/launch_rocm.sh reads only the config), which takes no
    ``--override``: one node with aorta_training_overrides would run without them, unsaid."""
    mode = "auto" if mode in (None, "") else str(mode)
    unreadable: LaunchError | None = None
    try:
        overridden = bool(_override_items(overrides))
    except LaunchError as exc:
        overridden, unreadable = True, exc  # said where the launch reads them, or below for script mode
    if mode not in LAUNCH_MODES:
        raise LaunchError(f"aorta_master_launch_mode: {mode!r} is not one of {', '.join(LAUNCH_MODES)}")
    nnodes = int(nnodes)
    if nnodes < 1:
        raise LaunchError("aorta_nodes: no nodes to launch on")
    if mode == "auto":
        return "script" if nnodes == 1 and not overridden else "torchrun"
    if mode == "script" and nnodes > 1:
        raise LaunchError(
            f"aorta_master_launch_mode: 'script' runs on one node only, but the cluster has {nnodes}; "
            "use 'torchrun' or 'auto', or list one node in the cluster file"
        )
    if mode == "script" and unreadable is not None:
        raise unreadable
    if mode == "script" and overridden:
        raise LaunchError(
            "aorta_master_launch_mode: 'script' runs the experiment script, which takes no --override, so "
            "aorta_training_overrides would not apply: use 'torchrun' or 'auto', or leave the overrides out"
        )
    return mode


def config_output_dir(config: Any, mount_path: str, config_name: str = "base config") -> str:
    """Where Aorta writes in ``script`` mode: the config's ``training.output_dir`` (Aorta's default
    ``artifacts``), relative to the mount, since Aorta's launch_rocm.sh passes no ``--override``.
    An absolute path must lie under ``mount_path`` (the container's view of aorta_path)."""
    training = config.get("training") if isinstance(config, Mapping) else None
    value = training.get("output_dir") if isinstance(training, Mapping) else None
    text = "artifacts" if value in (None, "") else str(value)
    mount = str(mount_path).rstrip("/")
    if text.startswith("/"):
        if not text.startswith(mount + "/"):
            raise LaunchError(
                f"{config_name}: training.output_dir {text!r} is outside {mount} (aorta_path in the container); "
                "its traces could not be collected"
            )
        text = text[len(mount) + 1 :]
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise LaunchError(f"{config_name}: training.output_dir {text!r} must be a directory below aorta_path")
    return "/".join(parts)


def override_value(value: Any) -> str:
    """Text form of an override value, in the syntax Aorta's merge_cli_overrides coerces back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        raise LaunchError("aorta_training_overrides: a value may not be a mapping; use dotted keys instead")
    return str(value)


def _override_items(overrides: Any) -> list[tuple[Any, Any]]:
    """(key, value) pairs from a mapping, a list of ``key=value`` strings, or a string: an AWX survey
    answer is text, either a JSON object or ``key=value`` words split by spaces or newlines."""
    if overrides in (None, ""):
        return []
    if isinstance(overrides, str):
        text = overrides.strip()
        if text.startswith("{"):
            try:
                overrides = json.loads(text)
            except ValueError as exc:
                raise LaunchError(f"aorta_training_overrides: not a JSON object: {exc}") from None
        else:
            try:
                overrides = shlex.split(text)
            except ValueError as exc:
                raise LaunchError(f"aorta_training_overrides: cannot split {text!r}: {exc}") from None
    if isinstance(overrides, Mapping):
        return list(overrides.items())
    if isinstance(overrides, Sequence) and not isinstance(overrides, str):
        items: list[tuple[Any, Any]] = []
        for token in overrides:
            if not isinstance(token, str) or "=" not in token:
                raise LaunchError(f"aorta_training_overrides: entries must be 'key=value', got {token!r}")
            key, value = token.split("=", 1)
            items.append((key, value))
        return items
    raise LaunchError("aorta_training_overrides: must be a mapping of dotted keys to values")


def override_of(overrides: Any, key: str) -> Any:
    """The value ``overrides`` (in any form ``_override_items`` takes) gives ``key``, or None
    (also for overrides that do not parse: saying why is the launch's job, not a reader's)."""
    try:
        items = _override_items(overrides)
    except LaunchError:
        return None
    return dict(items).get(key)


def override_tokens(overrides: Any, output_dir: str | None = None) -> list[str]:
    """``key=value`` tokens, in the given order, for the ONE ``--override`` group; ``output_dir``
    comes first as ``training.output_dir``."""
    items = _override_items(overrides)
    if output_dir:
        if any(key == "training.output_dir" for key, _value in items):
            # Collection and teardown look in the run-scoped directory; a second one would be lost.
            raise LaunchError("aorta_training_overrides: training.output_dir: set aorta_output_dir instead")
        items.insert(0, ("training.output_dir", output_dir))
    tokens = []
    for key, value in items:
        if not isinstance(key, str) or not _OVERRIDE_KEY.match(key):
            raise LaunchError(f"aorta_training_overrides: key {key!r} is not a dotted config key ([A-Za-z0-9_.-])")
        tokens.append(f"{key}={override_value(value)}")
    return tokens


def _str_list(name: str, value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise LaunchError(f"{name}: must be a list of arguments, one per item (got {type(value).__name__})")
    return [str(v) for v in value]


def torchrun_argv(spec: Mapping[str, Any]) -> list[str]:
    """torchrun command as a list, never a shell string.

    Order: torchrun, --nnodes, --node_rank, --nproc_per_node, --master_addr, --master_port, extra
    torchrun args, train script, --config FILE, ONE --override with every key=value (Aorta's argparse
    ``nargs="*"`` keeps only the last group), then extra train args.
    """
    try:
        nnodes = int(spec["nnodes"])
        node_rank = int(spec["node_rank"])
        nproc = int(spec["nproc_per_node"])
        port = int(spec["master_port"])
    except KeyError as exc:
        raise LaunchError(f"torchrun_argv: {exc.args[0]} is required") from None
    except (TypeError, ValueError) as exc:
        raise LaunchError(
            f"torchrun_argv: nnodes, node_rank, nproc_per_node and master_port must be integers ({exc})"
        ) from None
    if not 0 <= node_rank < nnodes:
        raise LaunchError(f"torchrun_argv: node_rank {node_rank} is outside 0..{nnodes - 1}")
    if nproc < 1:
        raise LaunchError("aorta_nproc_per_node: must be at least 1")
    if not 1 <= port <= 65535:
        raise LaunchError(f"aorta_master_port: {port} is not a TCP port")
    for required in ("master_addr", "train_script", "config"):
        if not spec.get(required):
            raise LaunchError(f"torchrun_argv: {required} is required")
    argv = [
        str(spec.get("torchrun") or "torchrun"),
        f"--nnodes={nnodes}",
        f"--node_rank={node_rank}",
        f"--nproc_per_node={nproc}",
        f"--master_addr={spec['master_addr']}",
        f"--master_port={port}",
    ]
    argv += _str_list("aorta_extra_torchrun_args", spec.get("extra_torchrun_args"))
    argv += [str(spec["train_script"]), "--config", str(spec["config"])]
    tokens = override_tokens(spec.get("overrides"), spec.get("output_dir"))
    if tokens:
        argv += ["--override", *tokens]
    argv += _str_list("aorta_extra_train_args", spec.get("extra_train_args"))
    return argv


def _env_value(value: Any) -> str:
    """Shell text for an environment value: ``$NAME``/``${NAME}`` expand, everything else is literal."""
    text = override_value(value) if isinstance(value, bool) else str(value)
    parts, last = [], 0
    for match in _ENV_REF.finditer(text):
        if match.start() > last:
            parts.append(shlex.quote(text[last : match.start()]))
        parts.append('"${' + (match.group(1) or match.group(2)) + ':-}"')
        last = match.end()
    if last < len(text) or not parts:
        parts.append(shlex.quote(text[last:]))
    return "".join(parts)


def launch_script(
    argv: Sequence[str], env: Mapping[str, Any] | None = None, workdir: str | None = None, log: str | None = None
) -> str:
    """A bash script that exports ``env`` and execs ``argv``.

    Environment values may refer to other variables as ``$NAME``/``${NAME}`` (so
    ``LD_LIBRARY_PATH=/x:$LD_LIBRARY_PATH`` keeps the image's value); nothing else in a value or
    in ``argv`` is ever interpreted by the shell: each argument arrives byte for byte.
    With ``log``, everything the script and the program print goes to that file.
    """
    if not argv:
        raise LaunchError("launch_script: empty command")
    lines = ["#!/usr/bin/env bash", "# Generated by aorta.cluster: exports, then exec. Do not edit.", "set -e"]
    if log:
        lines.append(f"exec >{shlex.quote(str(log))} 2>&1")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise LaunchError(f"aorta environment: {name!r} is not a valid variable name")
        if value is None:
            continue
        lines.append(f"export {name}={_env_value(value)}")
    if workdir:
        lines.append(f"cd {shlex.quote(str(workdir))}")
    lines.append("exec " + " ".join(shlex.quote(str(arg)) for arg in argv))
    return "\n".join(lines) + "\n"


def base_env(
    environment: Mapping[str, Any] | None,
    rccl_build_path: str,
    extra_env: Mapping[str, Any] | None = None,
    fabric_env: Mapping[str, Any] | None = None,
    flight_recorder: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The container environment CVS builds, plus the fabric interface, with the user's extra_env last.

    ``flight_recorder`` (``entries``, ``dump_dir``) adds :func:`flight_recorder_env` for every name
    neither ``environment`` nor ``extra_env`` sets.

    ``environment`` is CVS's ``environment`` block; TENSILE_STREAMK_MAX_CUS leaves the CUs RCCL's
    channels do not take to GEMMs; LD_LIBRARY_PATH keeps the image's value (expanded by the launch
    script, not replaced). ``fabric_env`` (NCCL/GLOO_SOCKET_IFNAME) yields to ``extra_env``.
    """
    env: dict[str, Any] = {}
    for name, value in (environment or {}).items():
        env[str(name)] = value
    channels = env.get("NCCL_MAX_NCHANNELS")
    if channels not in (None, ""):
        try:
            env["TENSILE_STREAMK_MAX_CUS"] = 256 - int(channels)
        except (TypeError, ValueError):
            raise LaunchError(f"aorta_environment.NCCL_MAX_NCHANNELS: {channels!r} is not a number") from None
    if rccl_build_path:
        env["LD_LIBRARY_PATH"] = (
            f"{rccl_build_path}/build/release/:/opt/rocm/lib:/opt/rocm/lib64:/opt/openmpi/lib:"
            "/opt/rccl-tests/build:$LD_LIBRARY_PATH"
        )
        env["rccl_path"] = rccl_build_path
    env.update(fabric_env or {})
    if flight_recorder:
        for name, value in flight_recorder_env(flight_recorder.get("entries"), flight_recorder.get("dump_dir")).items():
            env.setdefault(name, value)
    env.update(extra_env or {})
    return env


# Where the capture pokes each rank's flight recorder: container-local, never in collected output.
FR_PIPE_STEM = "/tmp/aorta-cluster-fr-pipe-rank"


def flight_recorder_env(entries: Any, dump_dir: Any) -> dict[str, Any]:
    """torch's flight-recorder variables, for NCCL/RCCL and gloo alike (each backend reads its own).

    Names as in torch's source: ``TORCH_FR_BUFFER_SIZE`` (any backend) and
    ``TORCH_NCCL_TRACE_BUFFER_SIZE`` (ProcessGroupNCCL; its dump pipe checks this one) switch the
    recorder on; ``TORCH_NCCL_DUMP_ON_TIMEOUT`` dumps it on a watchdog timeout;
    ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` makes ``<stem><rank>.pipe`` a dump trigger; the dumps go to
    ``TORCH_FR_DUMP_TEMP_FILE``/``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` ``<stem><rank>``. ``entries`` 0
    sets none of them.
    """
    try:
        count = int(entries or 0)
    except (TypeError, ValueError):
        raise LaunchError(f"aorta_flight_recorder_entries: {entries!r} is not a number") from None
    if count < 0:
        raise LaunchError(f"aorta_flight_recorder_entries: {count} must be >= 0 (0 switches it off)")
    if count == 0:
        return {}
    if not dump_dir or not str(dump_dir).startswith("/"):
        raise LaunchError(f"flight recorder dump directory {dump_dir!r} must be an absolute path in the container")
    stem = str(dump_dir).rstrip("/") + "/fr_rank"
    return {
        "TORCH_FR_BUFFER_SIZE": count,
        "TORCH_NCCL_TRACE_BUFFER_SIZE": count,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": 1,
        "TORCH_FR_DUMP_TEMP_FILE": stem,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": stem,
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": FR_PIPE_STEM,
    }
