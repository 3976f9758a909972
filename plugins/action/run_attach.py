# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.run_attach (documented in plugins/modules/run_attach.py): what
the node kept at launch becomes its aorta_prepare and aorta_launch again, so the plays that end,
collect and record a run serve a watch re-attached from another controller unchanged."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ansible.errors import AnsibleConnectionFailure
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import STOP_WORDS
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import controller_identity
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import run_head
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step

display = Display()

NAMES = ("aorta_run_id_resolved", "aorta_lease_dir", "aorta_connect_timeout", "aorta_kill_grace_seconds")


def stop_args(grace_seconds: Any, who: str, now: dt.datetime) -> dict[str, Any]:
    """What a stop asks of the module: the head's stop request with who asked and when, and every
    node's wait for its supervisor, to the supervisors' own stop bound once the head has told them
    (a heartbeat for the head to read the request, one for each worker to hear of it)."""
    bound = _time_bounds.stop_bound_s(int(grace_seconds), 0) + 2 * _time_bounds.HEARTBEAT_S
    return {
        "stop_reason": f"{STOP_WORDS} from {who} at {now:%Y-%m-%d %H:%M:%S} UTC",
        "wait_seconds": int(bound),
        "grace_seconds": int(grace_seconds),  # the node waits longer for a run launched with a longer grace
    }


def holder_words(lease: dict[str, Any] | None) -> str:
    """Who holds the node, for a refusal."""
    if not lease:
        return "the node is free"
    if lease.get("live"):
        return f"the node is held by {lease.get('line')}"
    return f"the node's last lease was {lease.get('line')}"


def attachment(node: str, is_head: bool, run_id: str, answer: dict[str, Any], purpose: str) -> dict[str, Any]:
    """The task's result from the module's ``answer``: ``prepare`` and ``launch`` for the play (the
    launch's own results, or those of a node the run excluded), or ``failed`` with one line. Only the
    cluster file's head refuses a wrong id (one line, not one per node); a node that holds nothing of
    the run is ended as not launched. To a stop, a run that has already ended is said, once, not stopped."""
    kept, status, lease = answer.get("attach"), answer.get("status") or {}, answer.get("lease")
    # A stop by a scaling campaign's id answers for the campaign's group run on this node (the module says which).
    held = str(answer.get("run_id") or run_id)
    ours = bool(lease and lease.get("run_id") == held and lease.get("live"))
    if purpose == "stop":
        return stopped(node, is_head and held == run_id, held, answer, kept, ours)
    if kept:
        launch = dict(kept.get("launch") or {})
        # The supervisor's own pid and the container's start, as the launch task returned them.
        launch["job"] = {"pid": kept.get("supervisor_pid"), "status_path": launch.get("status_path")}
        launch["started"] = kept.get("started") or {}
        return {
            "changed": False,
            "prepare": kept.get("prepare") or {},
            "launch": launch,
            "run_started_epoch": kept.get("run_started_epoch"),
            "state": status.get("state") or "unknown",
        }
    if status:
        # A supervisor of this run ran here, but what its launch kept cannot be read (another account
        # launched it: the file is 0600; its write failed; a collection before the re-attached watch
        # launched it). Never taken for excluded or absent: their end would remove its container.
        why = answer.get("attach_error") or "missing"
        return {
            "failed": True,
            "msg": f"run {run_id} ran on {node} ({status.get('state')}), but runs/{run_id}.attach.json is {why}: "
            "re-attach as the account that launched it, or stop it with aorta.cluster.stop",
        }
    if ours:  # held by the run, never launched: preflight excluded it
        why = f"excluded from run {run_id} by its preflight (that run's console log says why)"
        return {
            "changed": False,
            "prepare": {"excluded": True, "reached": True, "failures": [why]},
            "launch": {"excluded": True},
            "state": "excluded",
        }
    if is_head:
        return {"failed": True, "msg": f"no run {run_id} was launched on {node}: {holder_words(lease)}"}
    return {"changed": False, "prepare": {"reached": True}, "launch": {}, "state": "absent"}


def stopped(
    node: str, is_head: bool, run_id: str, answer: dict[str, Any], kept: dict[str, Any] | None, ours: bool
) -> dict[str, Any]:
    """A stop's result on one node: ``run_id`` (the campaign's group run for a campaign's id) and, for
    the teardown after it, that run's rank here when the launch kept it, or who holds the node
    where nothing of the id ran here. ``is_head``: the cluster file's head, for a run's own id (a
    campaign's groups have heads of their own)."""
    status, lease = answer.get("status") or {}, answer.get("lease")
    # Ended before this stop asked anything (the status is read again after the wait it asked for).
    if is_head and status.get("finished") and not ours and not answer.get("asked_head"):
        # Nothing left to stop (a first Ctrl-C's stop may have ended it already): said, not failed.
        why = f"{status.get('outcome')}: {status.get('reason')}" if status.get("reason") else status.get("outcome")
        line = f"run {run_id} already ended on {node} ({why}): nothing to stop; {holder_words(lease)}"
        return {"changed": False, "state": "finished", "line": line, "run_id": run_id}
    # An id nothing of which ran here is not refused on one node: a campaign's groups may not have
    # reached the cluster file's head yet; stop_record refuses the id once every node has answered.
    said = {
        "changed": bool(answer.get("asked_head")),
        "state": status.get("state") or ("held" if ours else "absent"),
        "outcome": status.get("outcome"),
        "reason": str(status.get("reason") or "")[:300],
        "asked_head": bool(answer.get("asked_head")),
        "waited_s": answer.get("waited_s", 0),
        "run_id": run_id,
    }
    if not kept and not ours and not status:
        said["holder"] = holder_words(lease)
    rank = ((kept or {}).get("launch") or {}).get("rank")
    if isinstance(rank, int):  # else the teardown takes the node's rank in the cluster file
        said["node_rank"] = rank
    return said


def unreachable_node(purpose: str, why: str) -> dict[str, Any]:
    """A node the controller cannot reach: the watch ends it as unreachable (node_end neither waits
    for it nor tears it down; run.json names it, as the original play would), the stop lists it as
    not finished (the teardown's own task tolerates the node being gone)."""
    if purpose == "stop":
        return {"changed": False, "state": "unreachable", "outcome": None, "reason": why[:300], "asked_head": False}
    return {
        "changed": False,
        "prepare": {"reached": False},
        "launch": {"unreachable": why[:300]},
        "state": "unreachable",
    }


def unconfirmed(run_id: str, states: dict[str, str]) -> str:
    """Why a watch must record nothing of ``run_id``, or '': no node that answered holds it
    (``states``: each node's run_attach state, in rank order). The head refuses an id it never ran;
    with the head unreachable nothing would, and the plays after would record a FAILED run that
    nobody confirmed."""
    if any(state not in ("absent", "unreachable") for state in states.values()):
        return ""
    gone = [node for node, state in states.items() if state == "unreachable"]
    more = f" and {len(gone) - 5} more" if len(gone) > 5 else ""
    return (
        f"watch: run {run_id}: no node that answered holds it ({len(gone)} of {len(states)} nodes not reached: "
        f"{', '.join(gone[:5])}{more}); nothing recorded. Check -e aorta_run_id, or watch again once they answer"
    )


class ActionModule(Step):
    _VALID_ARGS = frozenset(("purpose",))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        purpose = str(self._task.args.get("purpose") or "watch")
        if purpose not in ("watch", "stop", "confirm"):
            result.update(failed=True, msg=f"purpose: watch, stop or confirm, not {purpose!r}")
            return result
        try:
            s = _settings.read(self._templar.template, task_vars, NAMES)
        except _settings.SettingsError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        run_id = str(s["aorta_run_id_resolved"])
        if not run_id:
            result.update(failed=True, msg="pass -e aorta_run_id=<id>: the run printed it at its start")
            return result
        if purpose == "confirm":  # on the controller, from every node's registered watch result
            nodes = [str(n) for n in task_vars.get("ansible_play_hosts_all") or []]
            hostvars = task_vars.get("hostvars") or {}
            kept = _node_results.host_values(hostvars, nodes, ("aorta_attach",), self._templar.template)
            states = {node: str(dict(kept[node].get("aorta_attach") or {}).get("state") or "absent") for node in nodes}
            refused = unconfirmed(run_id, states)
            result.update(changed=False, failed=bool(refused), msg=refused or f"run {run_id} is held by its nodes")
            return result
        _settings.bound_connection(self._connection, s["aorta_connect_timeout"], run_id)
        args = {"run_id": run_id, "directory": s["aorta_lease_dir"], "purpose": purpose}
        if purpose == "stop":
            now = dt.datetime.now(dt.timezone.utc)
            args.update(stop_args(s["aorta_kill_grace_seconds"], controller_identity(), now))
        node = str(task_vars.get("inventory_hostname"))
        try:
            answer = self._execute_module(module_name="aorta.cluster.run_attach", module_args=args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            # Not a failure of the task: with any_errors_fatal it would end every node's watch or stop,
            # and a node that died with the controller is the case a re-attached watch is for.
            result.update(unreachable_node(purpose, f"{node}: {exc}"))
            return result
        if answer.get("failed"):
            result.update(failed=True, msg=f"run_attach: {answer.get('msg')}")
            return result
        result.update(
            attachment(node, node == run_head(task_vars.get("groups"), fallback=node), run_id, answer, purpose)
        )
        if result.get("line"):
            display.display(result["line"])
        return result
