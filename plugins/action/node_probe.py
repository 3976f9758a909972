# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run node_probe on the node, then judge its facts here, in the controller's own Python."""

from __future__ import annotations

import time
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _health_verdict
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import (
    controller_identity,
    owner_is_gone,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._preflight import judge
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._tools import pyspy_plan


def link_facts(derived: dict[str, Any], links: dict[str, Any]) -> None:
    """The fabric interface's link (speed, MTU, state, driver, error counters) into ``derived``, its
    speed and MTU into the fingerprint (with the health checks or without): a node whose link came
    up slower or with another MTU shows as drift."""
    link = links.get(str(derived.get("fabric_if") or ""))
    if not link:
        return
    derived["link"] = link
    fingerprint = derived.setdefault("fingerprint", {})
    fingerprint["link_speed_mbps"] = link.get("speed_mbps")
    fingerprint["link_mtu"] = link.get("mtu")
    if not fingerprint.get("nic_driver"):
        fingerprint["nic_driver"] = link.get("driver")


class ActionModule(ActionBase):
    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result.update(self.probe(dict(self._task.args), task_vars))
        return result

    def probe(self, args: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None) -> dict[str, Any]:
        """The module's answer, judged: ``derived`` (fabric, record, py-spy), and failed with every
        failure named. ``pyspy``: a py-spy plan made once for the run, instead of O(pyspy)'s setting."""
        expect = args.pop("expect", None) or {}
        answer, pyspy = self.execute(args, task_vars, pyspy)
        return self.judged(answer, expect, task_vars, pyspy)

    def execute(
        self, args: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None
    ) -> tuple[dict[str, Any], Any]:
        """The module's answer as the node gave it (``_answered``: the controller's clock when it
        arrived), and the py-spy plan its tools were checked against (None without O(pyspy))."""
        if "pyspy" in args:  # the controller's py-spy: the node says whether it has this very binary
            lease_dir = (args.get("lease") or {}).get("directory") or "/var/tmp/aorta-cluster"
            setting = args.pop("pyspy")
            pyspy = pyspy if pyspy is not None else pyspy_plan(setting, f"{lease_dir.rstrip('/')}/tools")
            if pyspy["source"]:
                args["tools"] = [{"name": "py-spy", "path": pyspy["node_path"], "size": pyspy["size"]}]
        if args.get("lease") and not args["lease"].get("owner"):
            args["lease"] = dict(args["lease"], owner=controller_identity())
        probe = self._execute_module(module_name="aorta.cluster.node_probe", module_args=args, task_vars=task_vars)
        holder = probe.get("holder") or {}
        if probe.get("failed") and owner_is_gone(holder.get("owner", "")):
            # Held for an ansible-playbook of this controller that has died (Ctrl-C, SIGKILL): nobody
            # will collect that run; the node stops it now instead of at its deadline.
            args["lease"] = dict(args["lease"], gone_owner=holder["owner"])
            probe = self._execute_module(module_name="aorta.cluster.node_probe", module_args=args, task_vars=task_vars)
        probe["_answered"] = time.time()
        return probe, pyspy

    @staticmethod
    def judged(
        probe: dict[str, Any], expect: dict[str, Any], task_vars: dict[str, Any] | None, pyspy: Any = None
    ) -> dict[str, Any]:
        """An answer of ``execute`` judged against ``expect`` (``_preflight.judge``, the health verdict)."""
        result = dict(probe)
        after = result.pop("_answered", time.time())
        if probe.get("failed") or "facts" not in probe:
            return result
        result["facts"] = facts = dict(probe["facts"])
        node = str((task_vars or {}).get("inventory_hostname", "node"))
        verdict = judge(node, facts, expect)
        health = facts.get("health")
        verdict["failures"].extend(_health_verdict.judge(node, health, expect))
        derived = verdict["derived"]
        if health:
            derived["health"] = _health_verdict.summary(health)
            derived["fingerprint"] = health.get("fingerprint") or {}
        # Only the fabric interface's link is kept: every node's result is read at the record.
        link_facts(derived, facts.pop("links", None) or {})
        if pyspy is not None:
            derived["pyspy"] = dict(pyspy, present=bool(facts.get("tools", {}).get("py-spy")))
        # The node reads its clock last, just before it answers: against the controller's clock when
        # the answer arrived, the error is the return trip (milliseconds), not the module's run time.
        derived.setdefault("record", {})["clock_offset_s"] = round(facts["clock"] - after, 3)
        result["derived"] = derived
        if verdict["failures"]:
            result.update(failed=True, msg="; ".join(verdict["failures"]), failures=verdict["failures"])
        return result
