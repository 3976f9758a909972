# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.stop_record (documented in plugins/modules/stop_record.py)."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import controller_identity
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._run_id import results_dir
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step

display = Display()

NAMED_AT_MOST = 10  # nodes named on the console line; run.json names every one


def stop_entry(stops: dict[str, Any], who: str, now: dt.datetime, played: list[str] | None = None) -> dict[str, Any]:
    """The entry for run.json's ``stops`` from each node's run_attach result (``{node: result}``);
    ``played``: the nodes this stop's play held (a --limit leaves the others out), all when None."""
    left_out = [node for node in stops if played is not None and node not in played]
    stops = {node: result for node, result in stops.items() if node not in left_out}
    not_finished = {
        node: str(result.get("state") or "unknown")
        for node, result in stops.items()
        if result.get("state") not in ("finished", "absent", "excluded", "unreachable")
    }
    return {
        # Outside the --limit: neither asked nor torn down by this stop.
        "not_in_this_stop": left_out,
        "at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "by": who,
        "asked_head": any(bool(result.get("asked_head")) for result in stops.values()),
        "finished": sum(1 for result in stops.values() if result.get("state") == "finished"),
        "not_finished": not_finished,
        # Neither asked nor waited for: whatever runs there stops at the run's own deadline.
        "unreachable": [node for node, result in stops.items() if result.get("state") == "unreachable"],
        # The runs whose heads were asked: the id's own, or a scaling campaign's group runs (run_attach).
        "runs": sorted({str(r["run_id"]) for r in stops.values() if r.get("run_id") and r.get("asked_head")}),
    }


def unknown(run_id: str, stops: dict[str, Any], played: list[str], head: str) -> str:
    """The refusal of an id that nothing on the cluster file's head holds or ran, nor on any other
    node that answered (a campaign's groups may hold nodes other than the head), naming who holds
    the head; '' otherwise, and where the head was not reached or not in the play (the stop's line
    says so instead)."""
    answered = {node: r for node, r in stops.items() if node in played and r.get("state") != "unreachable"}
    if head not in answered or any(r.get("state") != "absent" or "holder" not in r for r in answered.values()):
        return ""
    return f"no run {run_id} on {head}: {answered[head]['holder']}"


def named(nodes: list[str]) -> str:
    """At most NAMED_AT_MOST names and how many more: one line at any node count."""
    return first_names(nodes, NAMED_AT_MOST)


def stop_line(run_id: str, entry: dict[str, Any], nodes: int, run_json: str, head_node: str = "") -> str:
    """One line, whatever the node count (``head_node``: the run's head, named when --limit left it out)."""
    gone = entry.get("unreachable") or []
    outside = entry.get("not_in_this_stop") or []
    groups = [run for run in entry.get("runs") or () if run != run_id]
    if entry["asked_head"] and groups:
        head = f"a scaling campaign: asked the heads of its group runs ({named(groups)}) to stop every node"
    elif entry["asked_head"]:
        head = "asked its head to stop every node"
    elif head_node and head_node in outside:
        head = f"its head {head_node} was left out by --limit"
    elif gone and len(gone) == nodes:
        head = "no node answered"
    else:
        head = "its head had nothing to stop"
    left = entry["not_finished"]
    unfinished = f"; not finished, their containers removed now: {named([f'{n} ({s})' for n, s in left.items()])}"
    unreached = (
        f"; could not reach {len(gone)}: {named(gone)} (nothing asked of them: what runs there stops at the "
        "run's deadline; run the stop again once they answer)"
    )
    limited = (
        f"; left out by --limit, nothing asked of them: {named(outside)} (run the stop without --limit to stop them)"
    )
    where = f"; added to {run_json}" if run_json else "; no run.json of it here"
    return (
        f"stop {run_id}: {head}; {entry['finished']} of {nodes} nodes' supervisors finished"
        f"{unfinished if left else ''}{unreached if gone else ''}{limited if outside else ''}{where}"
    )


def append_stop(path: str, entry: dict[str, Any]) -> bool:
    """``entry`` added to run.json's ``stops``; False when there is no run.json at ``path``."""
    document = _settings.read_json_object(path)
    if document is None:
        return False
    document["stops"] = [*(document.get("stops") or []), entry]
    text = json.dumps(document, indent=4, sort_keys=True, separators=(",", ": "), default=str)
    _settings.write_text_atomic(path, text, 0o644)  # as run_record and run_outcome write it
    return True


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        template = self._templar.template
        run_id = str(template(task_vars.get("aorta_run_id", "")) or "")
        groups = task_vars.get("groups") or {}
        nodes = _node_results.nodes_of(groups)
        values = _node_results.host_values(task_vars.get("hostvars") or {}, nodes, ("aorta_stop",), template)
        stops = {node: dict(values[node].get("aorta_stop") or {}) for node in nodes}
        played = [str(node) for node in task_vars.get("ansible_play_hosts_all") or nodes]
        refused = unknown(run_id, stops, played, nodes[0] if nodes else "")
        if refused:  # nothing of the id on any node that answered: one line, nothing recorded
            result.update(failed=True, msg=refused)
            return result
        entry = stop_entry(stops, controller_identity(), dt.datetime.now(dt.timezone.utc), played)
        where = results_dir(
            str(template(task_vars.get("aorta_results_dir", "")) or ""),
            str(template(task_vars.get("aorta_results_root", "")) or ""),
            run_id,
            os.getcwd(),
        )
        path = os.path.join(where, "run.json")
        try:
            written = not self._task.check_mode and append_stop(path, entry)
        except OSError as exc:
            written = False
            result.setdefault("warnings", []).append(f"{path}: the stop is not recorded: {exc.strerror}")
        line = stop_line(run_id, entry, len(nodes), path if written else "", nodes[0] if nodes else "")
        result.update(changed=written, line=line, record=entry, run_json=path if written else "")
        if entry["unreachable"]:
            # Not done where it could not reach: a non-zero exit, this line its only message.
            result.update(failed=True, msg=line)
        else:
            display.display(line)
        return result
