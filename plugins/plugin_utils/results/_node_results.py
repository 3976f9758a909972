# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the nodes' steps returned, read from ``hostvars`` once (controller side): each node's
registered results (``host_values``), the run's nodes and head, ranks per node and world size, the
nodes' summaries, clock offsets and collection; a node step's failed result shortened for the console
(``shorten_failure``: node_prepare, node_launch) and read back whole from its details file
(``full_result``).

Private to this collection. Every function reads the nodes' variables as a plain mapping
``{host: {name: value}}`` (``host_values``): each ``hostvars[host]`` is a pass of the variable
manager, so the actions read each node once and hand the same values to every function here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _node_summary
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import GROUP_ALL
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _pull
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object, write_text_atomic
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import run_head
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import (
    MESSAGE_MAX,
    clip,
)

# What run_record reads of each node: its inventory variables, its three steps' registered results
# and its rescue's facts (setup stopped).
NODE_VARS = (
    "aorta_node_rank",
    "aorta_mgmt_ip",
    "aorta_vpc_ip",
    "aorta_cluster_file",
    "aorta_prepare",
    "aorta_launch",
    "aorta_end",
    "aorta_node_setup_task",
    "aorta_node_setup_result",
)
# What run_record reads of localhost: the collection's result and why collection stopped.
LOCAL_VARS = ("aorta_combined", "aorta_collect_failure")
# The nodes' registered results that node_prepare and node_launch may have shortened when they
# failed (``short_failure``): every reader here takes them whole from their details file (``full_result``).
SHORTENED_VARS = frozenset(("aorta_prepare", "aorta_launch", "aorta_node_setup_result"))
# The key of a shortened failed result that names the file holding it whole.
DETAILS_KEY = "details"
# A failed result's msg, at most, once shortened: one line, the rest in the details file.
SHORT_MSG_MAX = 200
# Left to the msg however long the details file's path is (a results directory and node name of
# some 150 characters together or more may then take the console line past MESSAGE_MAX).
SHORT_MSG_MIN = 40
# What ansible-core's default callback leaves out of a failed result's JSON (besides ``_ansible_*``):
# the module's arguments, and what it shows on lines of its own or not at all at default verbosity.
UNPRINTED = frozenset(("invocation", "exception", "warnings", "deprecations", "diff"))
# What the callback prints before that JSON, on the same line.
FATAL = "fatal: [{node}]: FAILED! => "


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _vars(hostvars: Mapping[str, Any], host: Any) -> Mapping[str, Any]:
    return _dict(hostvars.get(host)) if host is not None else {}


def _positive_int(value: Any) -> int | None:
    """``value`` as a count above 0, else None: a missing, empty or omitted value is never taken for 0."""
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def printed(result: Mapping[str, Any]) -> str:
    """``result`` as ansible-core's default callback prints a failed task's (``fatal: [node]:
    FAILED! => ...``): its JSON without the internal ``_ansible_*`` keys and ``UNPRINTED``; non-ASCII
    escaped, which the callback does not do (a bound measured on this holds for the callback's)."""
    shown = {k: v for k, v in result.items() if not str(k).startswith("_ansible_") and k not in UNPRINTED}
    return json.dumps(shown, sort_keys=True, default=str)


def details_file(results_dir: str, node: str, step: str) -> str:
    """Where a node's failed ``step`` (preflight, launch) keeps its whole result: beside the node's log."""
    return os.path.join(str(results_dir), "logs", f"{str(node).replace('/', '_')}.{step}.json")


def short_failure(
    result: Mapping[str, Any], path: str, keep: Iterable[str] = (), room: int = MESSAGE_MAX
) -> dict[str, Any]:
    """The failed ``result`` as the console shows it, printed in under ``room`` characters: failed,
    changed, its msg on one line cut (at most SHORT_MSG_MAX characters, less as the path takes room),
    ``warnings`` (the callback prints them on lines of their own), ``details`` (``path``, the file that
    holds ``result`` whole), and the keys named in ``keep`` that it has (small ones, which the
    registered result's own readers take: the teardown's ``reached``), only where they are not true,
    the default their readers take: the room goes to the msg)."""
    short: dict[str, Any] = {"changed": bool(result.get("changed", False)), "failed": True}
    short.update({k: result[k] for k in keep if k in result and result[k] is not True})
    if result.get("warnings"):
        short["warnings"] = result["warnings"]
    short[DETAILS_KEY] = path
    limit = SHORT_MSG_MAX
    while True:
        short["msg"] = clip(result.get("msg", "failed"), limit, "\u2026")
        over = len(printed(short)) - (room - 1)
        if over <= 0 or limit <= SHORT_MSG_MIN:
            return short
        limit = max(limit - over, SHORT_MSG_MIN)


def shorten_failure(
    result: dict[str, Any], results_dir: Any, node: str, step: str, keep: Iterable[str] = ()
) -> dict[str, Any]:
    """``result`` itself unless it failed and its console line (``FATAL`` and ``printed``) runs to
    MESSAGE_MAX characters or more: then it goes whole (without ``_ansible_*`` keys) into
    ``details_file`` (mode 0600: a launch's plan holds aorta_extra_env's values) and its
    ``short_failure`` comes back, its line under MESSAGE_MAX. Only into the logs/ directory run_start
    made (none under --check, and none when ``results_dir`` is None): without one, or when the file
    cannot be written, ``result`` stays whole (printed long, but nothing is lost)."""
    room = MESSAGE_MAX - len(FATAL.format(node=node))
    if not result.get("failed") or not results_dir or len(printed(result)) < room:
        return result
    path = details_file(str(results_dir), node, step)
    if not os.path.isdir(os.path.dirname(path)):
        return result
    whole = {k: v for k, v in result.items() if not str(k).startswith("_ansible_")}
    try:
        write_text_atomic(path, json.dumps(whole, indent=2, sort_keys=True, default=str), 0o600)
    except OSError:
        return result
    internal = {k: v for k, v in result.items() if str(k).startswith("_ansible_")}
    # Named from the results directory the run printed at its start: the room goes to the msg.
    return {**internal, **short_failure(result, os.path.relpath(path, str(results_dir)), keep, room)}


def full_result(value: Any, results_dir: str = "") -> Any:
    """A node step's registered result whole: one ``short_failure`` shortened is read back from its
    details file (its keys over the short ones; a relative path is the results directory's); any
    other value, or one whose file cannot be read, as it is. Every reader of aorta_prepare,
    aorta_launch and aorta_node_setup_result here takes them through this (``host_values``)."""
    if not isinstance(value, Mapping) or not value.get("failed") or not isinstance(value.get(DETAILS_KEY), str):
        return value
    whole = read_json_object(os.path.join(results_dir, value[DETAILS_KEY]))
    return value if whole is None else {**value, **whole}


def host_values(
    hostvars: Mapping[str, Any],
    hosts: Iterable[Any],
    names: Iterable[str],
    template: Callable[[Any], Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """``{host: {name: value}}`` for the ``names`` each host defines, each host's variables read once
    (``template`` applied to each value; a shortened failed result of SHORTENED_VARS read whole,
    ``full_result``). A host not in ``hostvars`` gets ``{}``."""
    wanted = tuple(names)
    found: dict[str, dict[str, Any]] = {}
    results_dir = ""  # where a shortened result's details file is named from: the run's, once
    if SHORTENED_VARS.intersection(wanted) and "localhost" in hostvars:
        given = hostvars["localhost"].get("aorta_results_dir_resolved")
        results_dir = str((template(given) if template else given) or "")
    for host in hosts:
        # Not .get(): ansible-core's HostVars answers an unknown host with an undefined marker, not KeyError.
        known = hostvars[host] if host in hostvars else {}  # noqa: SIM401
        values = {name: (template(known[name]) if template else known[name]) for name in wanted if name in known}
        found[str(host)] = {
            name: full_result(value, results_dir) if name in SHORTENED_VARS else value for name, value in values.items()
        }
    return found


def setup_stopped(hostvars: Mapping[str, Any], nodes: Iterable[Any]) -> bool:
    """Whether the launch play's rescue ran: each node that reached it (any_errors_fatal sends every
    node there, a node that was not reached runs nothing) remembers its failed task, if only ''."""
    return any("aorta_node_setup_task" in _vars(hostvars, node) for node in nodes)


def nodes_of(groups: Mapping[str, Any] | None) -> list[str]:
    """The group aorta_nodes in inventory order (the cluster file's, the head first); [] without it
    (trace_report.yml on a folder of traces has no nodes)."""
    return [str(name) for name in (groups or {}).get(GROUP_ALL) or []]


def head(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> str | None:
    """The run's head (``_plan.run_head``): the one the launch chose (node 0's ``aorta_launch.head``:
    with aorta_exclude_unhealthy, the first node that passed preflight), else the cluster file's;
    None without nodes."""
    nodes = nodes_of(groups)
    if not nodes:
        return None
    return run_head(groups, _dict(_vars(hostvars, nodes[0]).get("aorta_launch")))


def head_launch(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The head's ``aorta_launch`` result, ``{}`` when nothing was launched there."""
    return _dict(_vars(hostvars, head(hostvars, groups)).get("aorta_launch"))


def nproc(
    hostvars: Mapping[str, Any],
    groups: Mapping[str, Any] | None,
    nproc_per_node: Any = None,
    gpus_per_node: Any = None,
) -> int | None:
    """Ranks per node: the head's launch's ``nproc``; else ``nproc_per_node`` or ``gpus_per_node``
    (aorta_nproc_per_node, aorta_gpus_per_node) where the caller gives them. None when no launch
    happened and nothing was given: the caller says what that means (run.json's context keeps null,
    the diagnosis takes 1). Never 0: a missing or omitted value falls through, it is not counted."""
    for value in (head_launch(hostvars, groups).get("nproc"), nproc_per_node, gpus_per_node):
        count = _positive_int(value)
        if count is not None:
            return count
    return None


def expected_ranks(
    hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None, nproc_per_node: Any = None, gpus_per_node: Any = None
) -> int | None:
    """The run's world size: the nodes that ran (the launch's ``nnodes``, without those preflight
    excluded; else every node) times their ranks each (``nproc``); None when either is unknown."""
    nnodes = _positive_int(head_launch(hostvars, groups).get("nnodes")) or len(nodes_of(groups))
    ranks = nproc(hostvars, groups, nproc_per_node, gpus_per_node)
    return nnodes * ranks if nnodes and ranks else None


def summaries(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> tuple[list, list] | None:
    """(the per-file summaries the nodes made of their own traces, each with its ``node``, in node
    order; a row per node of how its analysis went, for the report's ``node_analysis``), read from
    the summary file each node's end fetched (``aorta_end.summary.path``, aorta_collect_traces sample
    or none); None when no node made one (the traces are then read on the controller). A node whose
    summary failed or cannot be read is an error entry: its ranks are then missing, and said why."""
    found: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    made = False
    for index, host in enumerate(nodes_of(groups)):
        summary = _dict(_dict(_vars(hostvars, host).get("aorta_end")).get("summary"))
        rank = _dict(_vars(hostvars, host).get("aorta_launch")).get("rank", index)
        if not summary:
            continue
        made = True
        try:
            if summary.get("error"):
                raise ValueError(str(summary["error"]))
            body = _node_summary.read(str(summary.get("path")))
        except ValueError as exc:
            found.append({"file": f"{host}: its summary", "error": f"{host}: {exc}", "node": host})
            continue
        found += [{**item, "node": host} for item in body.get("summaries") or []]
        figures = _dict(body.get("figures"))
        rows.append({"node": host, "rank": rank, **{key: figures.get(key) for key in ANALYSIS_FIGURES}})
    return (found, rows) if made else None


def collect_mode(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> dict[str, Any]:
    """The collection's mode as the nodes' ends resolved it (``aorta_end.collect_mode``: the same on
    every node, from _collect_plan.resolve), the first node's that has one; {} when none ended."""
    for host in nodes_of(groups):
        said = _dict(_dict(_vars(hostvars, host).get("aorta_end")).get("collect_mode"))
        if said:
            return dict(said)
    return {}


# What the report shows of each node's own analysis (trace_summary's figures).
ANALYSIS_FIGURES = ("decoder", "analysis_s", "traces", "bytes", "peak_rss_mb", "python")


def clock_offsets(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each node's clock minus the controller's, in seconds, as its preflight measured it
    (``aorta_prepare.derived.record.clock_offset_s``); nodes without one are left out."""
    found = {}
    for host in nodes_of(groups):
        prepared = _dict(_vars(hostvars, host).get("aorta_prepare"))
        offset = _dict(_dict(prepared.get("derived")).get("record")).get("clock_offset_s")
        if offset is not None:
            found[host] = offset
    return found


def ended(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> list[str]:
    """The nodes node_end ran on (each has an ``aorta_end`` result)."""
    return [host for host in nodes_of(groups) if "aorta_end" in _vars(hostvars, host)]


def collected_nodes(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> list[Any]:
    """combined_traces' ``nodes``: each ended node's ``aorta_end.collect``, where it has one."""
    ends = [_dict(_vars(hostvars, host).get("aorta_end")) for host in ended(hostvars, groups)]
    return [_pull.row_of(end["collect"]) for end in ends if "collect" in end]
