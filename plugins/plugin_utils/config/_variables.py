# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rules for the variables users set, checked before anything touches a node (controller side).

Private to this collection. Types are the argument specs' job; these are the ranges and shapes a
type cannot say: a deadline above zero, a port a rendezvous can bind, a path that stays under
aorta_path (it is joined to aorta_path for packing, hand-back and deletion), environment names
a shell accepts. One message per bad variable, naming it and its value.

And names: an ``aorta_*`` variable that is neither one users set (``_vocabulary.USER``, generated
from roles/variables.yml) nor one the collection sets itself (``INTERNAL``) is a misspelling until
the site says otherwise (``aorta_site_variables``); a misspelt deadline would otherwise run with
the default one.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._findings import kinds_of
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._thresholds import threshold_problems
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import USER

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OVERRIDE_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("is not a whole number")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError("is not a whole number")
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError("is not a whole number") from None


def _at_least(low: int) -> Callable[[Any], str | None]:
    def rule(value: Any) -> str | None:
        number = _int(value)
        return None if number >= low else f"must be at least {low}"

    return rule


def _optional(rule: Callable[[Any], str | None], unset: tuple = (None, "")) -> Callable[[Any], str | None]:
    """``rule`` unless the value means "not set" (an empty survey answer, null)."""

    def optional(value: Any) -> str | None:
        return None if any(value is u or (value == u and type(value) is type(u)) for u in unset) else rule(value)

    return optional


def _port(value: Any) -> str | None:
    number = _int(value)
    return None if 1024 <= number <= 65535 else "must be a TCP port from 1024 to 65535 (CVS allows no other)"


def _under_aorta_path(value: Any) -> str | None:
    text = str(value)
    if not text.strip():
        return "must not be empty"
    if text.startswith("/"):
        return "must be relative to aorta_path, not absolute"
    normal = posixpath.normpath(text)
    if normal == "." or normal.split("/")[0] == ".." or "\x00" in text:
        return "must stay under aorta_path (a relative path that does not climb out with '..')"
    return None


def _absolute(value: Any) -> str | None:
    text = str(value)
    if not text.startswith("/") or "/../" in f"{text}/":
        return "must be an absolute path without '..'"
    return None


def _env_names(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "must be a mapping of NAME: value"
    bad = [str(k) for k in value if not isinstance(k, str) or not _ENV_NAME.match(k)]
    return f"names that are not environment variable names: {', '.join(bad)}" if bad else None


def _not_empty(value: Any) -> str | None:
    return "must not be empty" if value is None or not str(value).strip() else None


def _number(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("is not a number")
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValueError("is not a number") from None


def _above_zero(value: Any) -> str | None:
    number = _number(value)
    return None if math.isfinite(number) and number > 0 else "must be a number above 0"


def _not_negative(value: Any) -> str | None:
    number = _number(value)
    return None if math.isfinite(number) and number >= 0 else "must be a number, 0 or more"


def _fraction(value: Any) -> str | None:
    number = _number(value)
    return None if math.isfinite(number) and 0 < number <= 1 else "must be a fraction above 0 and at most 1"


def _names(value: Any) -> str | None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        return "must be a list of variable names (shell-style patterns allowed)"
    return None


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    def rule(value: Any) -> str | None:
        return None if str(value) in choices else f"must be one of {', '.join(choices)}"

    return rule


def _nodes(value: Any) -> str | None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) for v in value):
        return 'must be a list of node names or node ranks, e.g. -e \'{"aorta_collect_nodes": ["node-17", 42]}\''
    return None


def _finding_kinds(value: Any) -> str | None:
    try:
        kinds_of(value)
    except ValueError as exc:
        return str(exc).split(": ", 1)[1]
    return None


def _collect_mode(value: Any) -> str | None:
    try:
        _collect_plan.mode(value, 1)
    except _collect_plan.CollectModeError:
        return f"must be one of {', '.join(_collect_plan.MODES)} (or true, false)"
    return None


def _override_keys(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None  # the text forms are parsed (and checked) by _launch.override_tokens
    bad = [str(k) for k in value if not isinstance(k, str) or not _OVERRIDE_KEY.match(k)]
    return f"keys that are not config keys (letters, digits, '.', '_', '-'): {', '.join(bad)}" if bad else None


def spelled(value: Any) -> Any:
    """A value as ``-e key=value`` gives it (text) read as the YAML it spells: 'false', '4', '[1, 2]'.
    Text comes back as plain ``str`` (Ansible hands templated text over in a ``str`` subclass, which
    ``_optional`` would not take for the empty default)."""
    if isinstance(value, str):
        text = str(value)
        try:
            return yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            return text
    return value


def _group_sizes(sizes: Any) -> str | None:
    if not isinstance(sizes, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        return "must be a list of group sizes, whole numbers from 1, e.g. [1, 2, 4]"
    return None


def _spelled_optional(rule: Callable[[Any], str | None], unset: tuple = (None, "")) -> Callable[[Any], str | None]:
    """``rule`` on the YAML the value spells, unless that is unset (``-e aorta_scaling_seed=null``)."""
    optional = _optional(rule, unset)
    return lambda value: optional(spelled(value))


def _true_or_false(value: Any) -> str | None:
    return None if isinstance(spelled(value), bool) else "must be true or false"


RULES: dict[str, Callable[[Any], str | None]] = {
    "aorta_timeout_seconds": _at_least(1),
    "aorta_setup_timeout_seconds": _at_least(1),
    "aorta_kill_grace_seconds": _at_least(0),
    "aorta_poll_seconds": _at_least(1),
    # Three reports (every 3 s) lost in a row must not stop a run.
    "aorta_heartbeat_timeout": _at_least(10),
    "aorta_connect_timeout": _at_least(1),
    "aorta_fabric_check_timeout": _at_least(1),
    "aorta_gpus_per_node": _at_least(1),
    "aorta_nproc_per_node": _optional(_at_least(1)),
    "aorta_collect_parallel": _at_least(1),
    "aorta_collect_traces": _collect_mode,
    "aorta_collect_all_max_nodes": _at_least(0),
    "aorta_collect_sample_nodes": _at_least(0),
    "aorta_collect_budget_gb": _not_negative,
    # A list: a name given alone as text would be read character by character (ranks 1, 7, ...).
    "aorta_collect_nodes": _nodes,
    "aorta_min_free_gb": _at_least(0),
    # 0 or empty: pick a free port on the head.
    "aorta_master_port": _optional(_port, (None, "", 0, "0")),
    "aorta_port_range_start": _port,
    "aorta_port_range_end": _port,
    "aorta_output_dir": _under_aorta_path,
    "aorta_path": _absolute,
    "aorta_lease_dir": _absolute,
    "aorta_extra_env": _env_names,
    "aorta_environment": _env_names,
    "aorta_training_overrides": _override_keys,
    "aorta_docker_image": _not_empty,
    "aorta_image_pull": _one_of("missing", "never"),
    # A fraction of the median: 0.1 means 10% slower; 0 or less would name every rank.
    "aorta_straggler_threshold": _above_zero,
    "aorta_fabric_sweep_seconds": _not_negative,
    "aorta_fabric_sweep_tool": _one_of("auto", "perftest", "tcp"),
    # A fraction of the rounds' median: above 1 would name every node.
    "aorta_fabric_slow_threshold": _fraction,
    "aorta_fabric_min_gbps": _not_negative,
    # A kind misspelt would leave the finding failing the verdict with nobody told why.
    "aorta_verdict_ignores": _finding_kinds,
    "aorta_link_errors_min": _at_least(1),
    "aorta_site_variables": _names,
    # CVS's expected_results: known names, finite numbers in range (ratios 0..1); lines name the key.
    "aorta_expected_results": lambda value: "; ".join(threshold_problems(value)) or None,
    # The scaling campaign's (the sizes against the node count: plugin_utils/campaign/_ladder).
    "aorta_scaling_sizes": _spelled_optional(_group_sizes, (None, "", [])),
    "aorta_scaling_seed": _spelled_optional(_at_least(0)),
    "aorta_scaling_min_efficiency": _spelled_optional(_fraction),
    "aorta_scaling_parallel": _at_least(1),
    "aorta_scaling_exclude": _true_or_false,
    "aorta_scaling_opening": _true_or_false,
}


def check(values: Mapping[str, Any]) -> list[str]:
    """One line per bad variable among ``values`` (variables not set are not judged)."""
    errors = []
    for name, rule in RULES.items():
        if name not in values:
            continue
        try:
            problem = rule(values[name])
        except ValueError as exc:
            problem = str(exc)
        if problem and name == "aorta_expected_results":
            errors.append(problem)  # each line already names the threshold and its value
        elif problem:
            errors.append(f"{name}: {values[name]!r} {problem}")
    start, end = values.get("aorta_port_range_start"), values.get("aorta_port_range_end")
    try:
        if start is not None and end is not None and _int(start) > _int(end):
            errors.append(f"aorta_port_range_start: {start!r} is above aorta_port_range_end {end!r}")
    except ValueError:
        pass  # already named above
    return errors


# Every aorta_* name the collection sets itself: the inventory's host and group variables, facts,
# registered results and task variables. tests/unit/plugins/plugin_utils/config/test_variables.py derives
# this set from the roles, playbooks and inventory code and keeps it equal.
INTERNAL = frozenset(
    {
        # inventory plugin and the aorta_cluster_file route (add_host); aorta_node_rank and
        # aorta_vpc_ip are in the vocabulary (roles/variables.yml: the steps read them)
        "aorta_mgmt_ip",
        "aorta_bmc_ip",
        "aorta_rack_id",
        "aorta_node_extra",
        "aorta_cluster_env",
        "aorta_cluster_orchestrator",
        "aorta_cluster_container",
        "aorta_cluster_nodes",
        "aorta_cluster_hosts",
        "aorta_ranks",
        # the inventory guard's messages, in short pieces
        "aorta_read_as",
        "aorta_groups",
        "aorta_how_to_read",
        "aorta_two_sources",
        "aorta_one_source",
        "aorta_found",
        "aorta_last",
        "aorta_hint",
        # facts, registered results and task variables of the playbooks and roles
        "aorta_collect_failure",
        "aorta_node_setup_task",
        "aorta_node_setup_result",
        # the node steps' registered results (node_prepare, node_launch, node_end) and the watch's play
        "aorta_prepare",
        "aorta_launch",
        "aorta_end",
        "aorta_pulled",
        "aorta_head",
        "aorta_combined",
        "aorta_cvs_vars_file",
        "aorta_parsed",
        "aorta_run_started_epoch",
        "aorta_rank_order",
        "aorta_run_start",
        "aorta_run_record",
        "aorta_run_outcome",
        "aorta_history",
        "aorta_run_secret_resolved",
        "aorta_watch",
        "aorta_attach",
        "aorta_stop",
        "aorta_campaign",
    }
)


def unknown_names(sources: Mapping[str, Iterable[str]], site_variables: Iterable[str] = ()) -> list[str]:
    """One line per ``aorta_*`` name that the collection does not define, with the nearest name it
    does. ``sources`` maps where the names were found (``extra vars``, ``host vars of n1``) to them;
    a name is reported once, at the first source that holds it. ``site_variables``: names or
    shell-style patterns a site uses for itself."""
    known = USER | INTERNAL
    allowed = list(site_variables)
    seen: set[str] = set()
    lines = []
    for where, names in sources.items():
        for name in sorted(set(names)):
            if not name.startswith("aorta_") or name in known or name in seen:
                continue
            seen.add(name)
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed):
                continue
            # Compared without the prefix every name shares, which would make any two look alike.
            near = difflib.get_close_matches(name[6:], sorted(n[6:] for n in USER), n=1, cutoff=0.6)
            hint = f"; did you mean aorta_{near[0]}?" if near else ""
            lines.append(
                f"{name} ({where}) is not a variable of aorta.cluster{hint} "
                "(a site's own aorta_* names go in aorta_site_variables)"
            )
    return lines
