# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.run_record (documented in plugins/modules/run_record.py).

The run's record was a chain of set_fact tasks, each a Jinja expression over every node's
hostvars, templated in ansible-playbook's single main process; the node rows, the head and the
rank count were each worked out in several of them. Here every node's variables are read once
and plugin_utils/results/_record.py computes each figure once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleError

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import ClusterFileError
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import write_text_atomic
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results, _record
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt

# The run_context role sets the first two (on localhost, handed to the nodes' plays as play vars);
# the role aorta.cluster.defaults gives the rest their defaults.
REQUIRED = (
    "aorta_run_id_resolved",
    "aorta_results_dir_resolved",
    "aorta_docker_image",
    "aorta_base_config",
    "aorta_training_overrides",
)
# Set only on some paths: the setup failure by the launch play's rescue, the start on localhost.
OPTIONAL: dict[str, Any] = {
    "aorta_run_failure_message": "",
    "aorta_run_failure_nodes": [],
    "aorta_run_started_epoch": None,
    "aorta_link_errors_min": DEFAULTS["aorta_link_errors_min"],
}


def write_text(path: str, text: str, mode: int) -> bool:
    """Write ``text`` to ``path`` atomically with ``mode`` (from the first byte: healthy.cluster.json
    may hold the SSH password); False when the file already held it with that mode."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text and os.stat(path).st_mode & 0o777 == mode:
                return False
    except (OSError, UnicodeDecodeError):
        pass
    write_text_atomic(path, text, mode)
    return True


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        missing = [name for name in REQUIRED if name not in task_vars]
        if missing:
            result.update(
                failed=True,
                msg=f"{', '.join(missing)}: not set; run_record runs after the role aorta.cluster.run_context, "
                "in a play that lists the role aorta.cluster.defaults (aorta_multinode.yml does)",
            )
            return result
        template = self._templar.template
        try:
            settings = {name: template(task_vars[name]) for name in REQUIRED}
            settings.update({name: template(task_vars.get(name, default)) for name, default in OPTIONAL.items()})
            # The user's first Ctrl-C or SIGTERM on the controller (plugin_utils/watch/_interrupt.py): STOPPED.
            settings["aorta_stop_request"] = _interrupt.requested()
            groups = task_vars.get("groups") or {}
            hostvars = task_vars.get("hostvars") or {}
            values = _node_results.host_values(
                hostvars, _node_results.nodes_of(groups), _node_results.NODE_VARS, template
            )
            local = _node_results.host_values(hostvars, ["localhost"], _node_results.LOCAL_VARS, template)
            # localhost may be a node too (a one-node run on the controller): its values join.
            values.setdefault("localhost", {}).update(local["localhost"])
            settings["aorta_run_started_epoch"] = self.started(settings, hostvars, values, groups)
        except AnsibleError as exc:
            result.update(failed=True, msg=f"run_record: {exc}")
            return result
        verbose = int(task_vars.get("ansible_verbosity") or 0) > 0
        found = _record.record(
            settings, values, groups, int(time.time()), every_node=verbose, dry_run=bool(self._task.check_mode)
        )
        results_dir = str(settings["aorta_results_dir_resolved"])
        run_json = os.path.join(results_dir, "run.json")
        # Nothing the health files hold is returned: healthy.cluster.json may hold the SSH password.
        result.update(
            changed=not self._task.check_mode,
            status=found["status"],
            diagnosis=found["diagnosis"],
            lines=found["lines"],
            run_json=run_json,
            ansible_stats=found["stats"],
            msg=found["lines"][0],
        )
        if self._task.check_mode:
            return result
        text = json.dumps(found["run_json"], indent=4, sort_keys=True, separators=(",", ": "))
        try:
            os.makedirs(results_dir, exist_ok=True)
            write_text(run_json, text, 0o644)
        except OSError as exc:
            result.update(failed=True, msg=f"cannot write {run_json}: {exc.strerror}")
            return result
        result["files"] = self._health_files(values, groups, found["health"], results_dir, result)
        return result

    def _health_files(
        self, values: dict[str, Any], groups: Any, health: dict[str, Any], results_dir: str, result: dict[str, Any]
    ) -> list[str]:
        """Write unhealthy.txt and healthy.cluster.json (after run.json: neither may cost the run its
        record); the names written. A failure is a warning naming the file, never its content."""
        try:
            files = _record.health_files(_record.cluster_source(values, groups), health)
        except ClusterFileError as exc:
            files = [("unhealthy.txt", str(health["unhealthy_text"]))]
            result.setdefault("warnings", []).append(f"healthy.cluster.json not written: {exc}")
        written = []
        for name, text in files:
            try:
                write_text(os.path.join(results_dir, name), text, 0o600)
                written.append(name)
            except OSError as exc:
                result.setdefault("warnings", []).append(f"{name} not written: {exc.strerror}")
        return written

    def started(
        self, settings: Mapping[str, Any], hostvars: Mapping[str, Any], values: Mapping[str, Any], groups: Mapping
    ) -> Any:
        """The run's start: this run's (run_start's), or for a watch re-attached from any controller
        the original run's, as its head kept it at the launch (run_attach's result there)."""
        head = _node_results.head(values, groups)
        kept = (
            self._templar.template((hostvars.get(head) or {}).get("aorta_attach"))
            if head and head in hostvars
            else None
        )
        if isinstance(kept, Mapping) and kept.get("run_started_epoch") is not None:
            return kept["run_started_epoch"]
        return settings.get("aorta_run_started_epoch")
