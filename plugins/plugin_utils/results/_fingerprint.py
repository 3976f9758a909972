# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What makes two runs comparable: a run's fingerprint (the nodes that ran, the image, the ROCm and
amdgpu versions, the GPUs per node and the effective Aorta config less the keys that do not change
a step's work), its short id, and how two fingerprints differ, line by line (controller side).

Private to this collection; standard library only. The history groups its runs by fingerprint and
``aorta_baseline: auto`` (results/_judging) compares a run only with one of the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError, override_tokens

# Config keys that never change a step's work: how many steps, where the output goes, what is
# profiled, the stand-in's faults.
NEUTRAL_KEYS = ("training.max_steps", "training.output_dir", "profiling.*", "standin.*")
# How many names a line lists before "and N more".
SHOWN = 3


def _ignored(key: str, patterns: Sequence[str]) -> bool:
    """Whether the dotted ``key`` is one of ``patterns``: the key itself, or a prefix ``a.b.*``
    (which also takes ``a.b``)."""
    for pattern in patterns:
        if pattern.endswith(".*"):
            stem = pattern[:-2]
            if key == stem or key.startswith(stem + "."):
                return True
        elif key == pattern:
            return True
    return False


def overrides_of(overrides: Any, patterns: Sequence[str]) -> dict[str, str]:
    """The run's overrides as ``{dotted key: value as Aorta reads it}`` (a mapping, a list of
    ``key=value`` or an AWX survey's text all give the same), less the ``patterns``; overrides that
    do not parse are kept whole under ``""``: such a run is comparable only with the same text."""
    try:
        tokens = override_tokens(overrides)
    except LaunchError:
        return {"": str(overrides)}
    found = {}
    for token in tokens:
        key, value = token.split("=", 1)
        if not _ignored(key, patterns):
            found[key] = value
    return dict(sorted(found.items()))


def _values(nodes: Sequence[Mapping[str, Any]], field: str) -> list[str]:
    """The distinct values of the nodes' fingerprint ``field``, sorted; unread values left out."""
    found = set()
    for node in nodes:
        value = _dict(node.get("fingerprint")).get(field)
        if value not in (None, ""):
            found.add(str(value))
    return sorted(found)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ran(run: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """run.json's node rows less the nodes preflight excluded (``excluded``, state ``excluded``)."""
    excluded = {str(_dict(e).get("name")) for e in run.get("excluded") or ()}
    rows = [_dict(n) for n in run.get("nodes") or () if isinstance(n, Mapping)]
    return [n for n in rows if n.get("state") != "excluded" and str(n.get("name")) not in excluded]


def fingerprint(run: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """What makes two runs comparable (``run``: run.json): ``nodes`` (the sorted names of the nodes
    that ran, excluded ones left out), ``image_id`` (the context's, else the nodes' distinct ones
    joined by commas), ``gpus_per_node``, ``rocm`` and ``amdgpu`` (the nodes' distinct versions) and
    ``config``: ``effective`` (run.json's ``context.effective_config``: the base config as the head
    read it with the overrides applied) less ``NEUTRAL_KEYS`` (``training.max_steps``,
    ``training.output_dir``, ``profiling.*``, ``standin.*``) and ``ignore`` (dotted keys, or
    prefixes ending in ``.*``); a run.json without it (an earlier version's, or a base config the
    head could not read) gives ``base_config`` (its path) and ``overrides`` less the same keys."""
    context = _dict(run.get("context"))
    nodes = _ran(run)
    image_id = context.get("image_id") or ",".join(_values(nodes, "image_id")) or None
    gpus = context.get("gpus_per_node")
    patterns = (*NEUTRAL_KEYS, *ignore)
    effective = context.get("effective_config")
    if isinstance(effective, Mapping):
        config: dict[str, Any] = {"effective": _without(effective, patterns)}
    else:
        config = {
            "base_config": context.get("base_config"),
            "overrides": overrides_of(context.get("overrides"), patterns),
        }
    return {
        "nodes": sorted(str(n.get("name")) for n in nodes),
        "image_id": str(image_id) if image_id else None,
        "gpus_per_node": gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
        "rocm": _values(nodes, "rocm"),
        "amdgpu": _values(nodes, "amdgpu"),
        "config": config,
    }


def _without(config: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """``config`` (dotted keys) less the keys ``patterns`` name, in key order."""
    return {key: config[key] for key in sorted(config) if not _ignored(str(key), patterns)}


def refine(fp: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """``fp`` less the overrides ``ignore`` names: a fingerprint kept in the index, made with fewer
    keys ignored, as ``fingerprint(run, ignore)`` would make it now."""
    patterns = (*NEUTRAL_KEYS, *ignore)
    config = _dict(fp.get("config"))
    if "effective" in config:
        return {**fp, "config": {"effective": _without(_dict(config["effective"]), patterns)}}
    overrides = {k: v for k, v in _dict(config.get("overrides")).items() if not _ignored(k, patterns)}
    return {**fp, "config": {**config, "overrides": overrides}}


def fingerprint_id(fp: Mapping[str, Any]) -> str:
    """A short stable name of ``fp``: 12 hex digits of the sha256 of its canonical JSON."""
    text = json.dumps(fp, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def short_id(image_id: Any) -> str:
    """An image id as people read it: ``sha256:`` and 12 hex digits."""
    if not image_id:
        return "(unknown)"
    text = str(image_id)
    return ",".join(p[:19] + "\u2026" if len(p) > 19 else p for p in text.split(","))


def listed(names: Sequence[str], first: int = SHOWN) -> str:
    return first_names(names, first)


def text_of(values: Any) -> str:
    if isinstance(values, list):
        return ", ".join(str(v) for v in values) or "(unknown)"
    return "(unknown)" if values in (None, "") else str(values)


def differences(a_fp: Mapping[str, Any], b_fp: Mapping[str, Any]) -> list[str]:
    """One short line per part in which fingerprint ``a_fp`` (this run) differs from ``b_fp`` (the
    other), e.g. ``image id sha256:ab... vs sha256:cd...``, ``nodes: 10.0.0.3 only in this run``,
    ``override training.lr: 0.1 vs unset``; [] when they are the same."""
    lines = []
    if a_fp.get("image_id") != b_fp.get("image_id"):
        lines.append(f"image id {short_id(a_fp.get('image_id'))} vs {short_id(b_fp.get('image_id'))}")
    a_nodes, b_nodes = set(a_fp.get("nodes") or ()), set(b_fp.get("nodes") or ())
    if a_nodes != b_nodes:
        parts = [f"{len(a_nodes)} vs {len(b_nodes)}"]
        if a_nodes - b_nodes:
            parts.append(f"{listed(sorted(a_nodes - b_nodes))} only in this run")
        if b_nodes - a_nodes:
            parts.append(f"{listed(sorted(b_nodes - a_nodes))} only in the other")
        lines.append("nodes: " + "; ".join(parts))
    for key, label in (("gpus_per_node", "GPUs per node"), ("rocm", "ROCm"), ("amdgpu", "amdgpu")):
        if a_fp.get(key) != b_fp.get(key):
            lines.append(f"{label} {text_of(a_fp.get(key))} vs {text_of(b_fp.get(key))}")
    a_config, b_config = _dict(a_fp.get("config")), _dict(b_fp.get("config"))
    if "effective" in a_config and "effective" in b_config:
        return lines + _config_differences(_dict(a_config["effective"]), _dict(b_config["effective"]))
    if ("effective" in a_config) != ("effective" in b_config):
        return [*lines, "config: only one of the two runs recorded its effective config (an earlier version?)"]
    if a_config.get("base_config") != b_config.get("base_config"):
        lines.append(f"base config {text_of(a_config.get('base_config'))} vs {text_of(b_config.get('base_config'))}")
    a_over, b_over = _dict(a_config.get("overrides")), _dict(b_config.get("overrides"))
    for key in sorted(set(a_over) | set(b_over)):
        if a_over.get(key) != b_over.get(key):
            name = key or "(unparsed overrides)"
            lines.append(f"override {name}: {a_over.get(key, 'unset')} vs {b_over.get(key, 'unset')}")
    return lines


def _config_differences(a_config: Mapping[str, Any], b_config: Mapping[str, Any]) -> list[str]:
    """``config <key>: <this run's> vs <the other's>`` per dotted key that differs, at most
    ``SHOWN * 3`` and then a count."""
    keys = [k for k in sorted(set(a_config) | set(b_config)) if a_config.get(k, _UNSET) != b_config.get(k, _UNSET)]
    lines = [
        f"config {key}: {_config_value(a_config.get(key, _UNSET))} vs {_config_value(b_config.get(key, _UNSET))}"
        for key in keys[: SHOWN * 3]
    ]
    if len(keys) > SHOWN * 3:
        lines.append(f"config: {len(keys) - SHOWN * 3} more keys differ")
    return lines


_UNSET = object()


def _config_value(value: Any) -> str:
    if value is _UNSET:
        return "unset"
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:39] + "\u2026"
