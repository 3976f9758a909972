# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Map an existing CVS ``aorta_benchmark.yaml`` onto this collection's ``aorta_*`` variables.

Private to this collection. Unknown keys are an error naming the key path: a typo must not be
dropped silently (CVS's own loader dropped extra ``environment`` keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import (
    CHANGEME,
    USER_ID,
    controller_user,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import CVS_KEYS
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError

# The mapped keys come from the vocabulary (each variable's CVS key, roles/variables.yml); the keys
# accepted but not used are this module's own.
TOP = {key: name for key, name in CVS_KEYS.items() if "." not in key}
BLOCKS: dict[str, dict[str, Any]] = {}
for _key, _name in CVS_KEYS.items():
    if "." in _key:
        _block, _sub = _key.split(".", 1)
        BLOCKS.setdefault(_block, {})[_sub] = _name
BLOCKS["rccl"]["clone_url"] = None
# CVS runs TraceLens inside the head container; this collection analyses on the controller.
BLOCKS["analysis"] = {
    k: None for k in ("enable_tracelens", "enable_gemm_analysis", "tracelens_script", "gemm_script", "skip_if_exists")
}
# Accepted, recorded as not used, with the reason.
NOT_USED = {
    "aorta_auto_clone": "nodes are never cloned; put the aorta checkout at aorta_path on every node",
    "aorta_clone_url": "nodes are never cloned",
    "rccl.clone_url": "not used by the launch (CVS recorded it only)",
    "analysis.*": "the trace_parse role analyses on the controller instead of TraceLens in the container",
}


def _resolve(value: Any, user: str, key: str) -> Any:
    if isinstance(value, str):
        if CHANGEME in value:
            raise LaunchError(f"{key}: contains {CHANGEME}; fill in the real value")
        return value.replace(USER_ID, user)
    if isinstance(value, Mapping):
        return {k: _resolve(v, user, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, user, f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def cvs_config(data: Any, path: str = "aorta_benchmark.yaml", user: str | None = None) -> dict:
    """``{'vars': {aorta_*: value}, 'not_used': [key: reason]}`` from a CVS aorta_benchmark.yaml."""
    if not isinstance(data, Mapping):
        raise LaunchError(f"{path}: expected a YAML mapping of CVS aorta settings")
    user = controller_user() if user is None else user
    out, not_used = {}, []
    for key, value in data.items():
        where = f"{path}: {key}"
        if key in TOP:
            out[TOP[key]] = _resolve(value, user, where)
        elif key in ("aorta_auto_clone", "aorta_clone_url"):
            not_used.append(f"{key}: {NOT_USED[key]}")
        elif key in BLOCKS:
            if not isinstance(value, Mapping):
                raise LaunchError(f"{where}: must be a mapping")
            for sub, sub_value in value.items():
                if sub not in BLOCKS[key]:
                    known = ", ".join(BLOCKS[key])
                    raise LaunchError(f"{where}.{sub}: unknown CVS key (known under {key}: {known})")
                target = BLOCKS[key][sub]
                if target is None:
                    not_used.append(f"{key}.{sub}: {NOT_USED.get(f'{key}.{sub}') or NOT_USED[f'{key}.*']}")
                else:
                    out[target] = _resolve(sub_value, user, f"{where}.{sub}")
        else:
            known = ", ".join(sorted([*TOP, *BLOCKS, "aorta_auto_clone", "aorta_clone_url"]))
            raise LaunchError(f"{where}: unknown CVS key (known: {known})")
    for name in ("aorta_master_port", "aorta_nproc_per_node"):
        if out.get(name) in (0, ""):
            out[name] = None  # CVS's later loader: 0 means auto
    return {"vars": out, "not_used": not_used}
