# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the report's throughput needs from the run's effective Aorta config (controller side).

Private to this collection. The effective config is the base config with the run's overrides
applied as Aorta's ``merge_cli_overrides`` does (dotted keys; true/false, then int, then float,
then ``[a,b]``), read from the same tokens the launch passes in its one ``--override`` group.
Aorta steps the optimizer once per batch, so a step consumes ``training.batch_size`` samples on
every data-parallel rank: no gradient-accumulation factor.
"""

from __future__ import annotations

from typing import Any

import yaml

from ansible_collections.aorta.cluster.plugins.plugin_utils._launch import LaunchError, override_tokens


def _coerce(raw: str) -> Any:
    """Aorta's _coerce_value, for the keys read here."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value


def run_settings(config_text: Any, overrides: Any, config_path: str = "") -> dict[str, Any]:
    """``batch_size`` (training.batch_size) and ``sequence_length`` (dataset.sequence_length) of the
    effective config, each None when not known, and ``note`` saying what could not be read."""
    config: dict = {}
    notes = []
    if isinstance(config_text, str) and config_text.strip():
        try:
            loaded = yaml.safe_load(config_text)
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
    training = config.get("training")
    dataset = config.get("dataset")
    training = training if isinstance(training, dict) else {}
    dataset = dataset if isinstance(dataset, dict) else {}
    return {
        "batch_size": _number(training.get("batch_size")),
        "sequence_length": _number(dataset.get("sequence_length")),
        "note": "; ".join(notes),
    }
