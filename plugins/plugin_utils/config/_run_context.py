# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's effective Aorta config (controller side): what the report's throughput needs of it, and
the whole of it, flattened, for the history's fingerprint.

Private to this collection. The effective config is the base config with the run's overrides
applied as Aorta's ``merge_cli_overrides`` does (dotted keys; true/false, then int, then float,
then ``[a,b]``), read from the same tokens the launch passes in its one ``--override`` group.
Aorta steps the optimizer once per batch, so a step consumes ``training.batch_size`` samples on
every data-parallel rank: no gradient-accumulation factor.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError, override_tokens


def _coerce(raw: str) -> Any:
    """Aorta's _coerce_value (aorta/utils/config.py): true/false, int, float, ``[a,b]`` (a list of
    the items as text), else the text."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [item.strip() for item in inner.split(",")] if inner else []
    return raw


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value


def _applied(config_text: Any, overrides: Any, config_path: str) -> tuple[dict[str, Any], bool, list[str]]:
    """(the base config with the overrides applied, whether the base config was read, what could not
    be read)."""
    config: dict = {}
    notes = []
    read = False
    if isinstance(config_text, str) and config_text.strip():
        try:
            loaded = yaml.safe_load(config_text)
            read = isinstance(loaded, dict)
        except yaml.YAMLError as exc:
            notes.append(f"{config_path or 'the base config'} is not YAML ({str(exc).splitlines()[0]})")
            loaded = {}
        config = loaded if isinstance(loaded, dict) else {}
    else:
        notes.append(f"{config_path or 'the base config'} was not read on the head")
    try:
        tokens = override_tokens(overrides)
    except LaunchError as exc:
        tokens = []
        read = False
        notes.append(str(exc))
    for token in tokens:
        key, raw = token.split("=", 1)
        target = config
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[parts[-1]] = _coerce(raw)
    return config, read, notes


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: lists, mappings and scalars kept, anything else (a YAML date) as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN or infinity (and NaN differs from itself)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found.update(_flat(value, dotted + "."))
        else:
            found[dotted] = _plain(value)
    return found


def effective_config(config_text: Any, overrides: Any, config_path: str = "") -> dict[str, Any] | None:
    """run.json's ``context.effective_config``: the base config as the head read it with the
    overrides applied, flattened to ``{dotted key: value}`` in key order; None when the base config
    was not read on the head, is not a YAML mapping, or the overrides do not parse (the run's work
    is then not known)."""
    config, read, _notes = _applied(config_text, overrides, config_path)
    return dict(sorted(_flat(config).items())) if read else None


def run_settings(config_text: Any, overrides: Any, config_path: str = "") -> dict[str, Any]:
    """``batch_size`` (training.batch_size) and ``sequence_length`` (dataset.sequence_length) of the
    effective config, each None when not known, and ``note`` saying what could not be read."""
    config, _read, notes = _applied(config_text, overrides, config_path)
    training = config.get("training")
    dataset = config.get("dataset")
    training = training if isinstance(training, dict) else {}
    dataset = dataset if isinstance(dataset, dict) else {}
    return {
        "batch_size": _number(training.get("batch_size")),
        "sequence_length": _number(dataset.get("sequence_length")),
        "note": "; ".join(notes),
    }
