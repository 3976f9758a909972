# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.campaign_run (documented in plugins/modules/campaign_run.py)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import time
import zlib
from typing import Any

import yaml
from ansible import context
from ansible.errors import AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _campaign_ids
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._files import write_text_atomic
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import plural
from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import (
    _children,
    _document,
    _figures,
    _ladder,
    _rungs,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import (
    ClusterFileError,
    healthy_cluster,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _variables
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import in_rank_order, read_json_object
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import DEFAULTS
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._run_id import RunStartError, make_dirs, start
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _scaling_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history, _junit
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._outcome import REPORT
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console, _interrupt

display = Display()

PLACES = ("aorta_run_id", "aorta_results_dir", "aorta_results_root")
SETTINGS = (
    "aorta_scaling_sizes",
    "aorta_scaling_seed",
    "aorta_scaling_exclude",
    "aorta_scaling_min_efficiency",
    "aorta_scaling_parallel",
    "aorta_scaling_opening",
)
# A run id is at most 64 characters; a group's adds "-opening-g0" or "-k1000-g999" to the campaign's.
ID_MAX = 48
# Beside the cluster file, what ansible-playbook reads with it: each group's file gets the same.
INVENTORY_DIRS = ("group_vars", "host_vars")


def checked(values: dict[str, Any]) -> dict[str, Any]:
    """The campaign's settings, as -e spells them read as YAML, checked by the collection's rules
    (_variables.RULES: check_variables ran them first; here for this action alone) and converted:
    ValueError with the first bad variable's line."""
    values = {name: _variables.spelled(value) for name, value in values.items()}
    errors = _variables.check(values)
    if errors:
        raise ValueError(errors[0])
    unset: tuple[Any, ...] = (None, "", [])
    sizes: Any = values.get("aorta_scaling_sizes")
    seed: Any = values.get("aorta_scaling_seed")
    bound: Any = values.get("aorta_scaling_min_efficiency")
    return {
        "aorta_scaling_sizes": None if sizes in unset else [int(size) for size in sizes],
        "aorta_scaling_seed": None if seed in unset else int(seed),
        "aorta_scaling_exclude": values.get("aorta_scaling_exclude", DEFAULTS["aorta_scaling_exclude"]),
        "aorta_scaling_opening": values.get("aorta_scaling_opening", DEFAULTS["aorta_scaling_opening"]),
        "aorta_scaling_min_efficiency": None if bound in unset else float(bound),
        "aorta_scaling_parallel": int(values.get("aorta_scaling_parallel", DEFAULTS["aorta_scaling_parallel"])),
    }


def source_options(sources: Any) -> dict[str, Any]:
    """The options of the campaign's own YAML inventory source for aorta.cluster.cluster_json (its
    ``connection_vars``, say), which each group's source repeats; {} where the nodes came from a
    cluster file given as it is."""
    for source in sources or ():
        if not str(source).endswith((".yml", ".yaml")) or not os.path.isfile(source):
            continue
        try:
            with open(source, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and str(data.get("plugin")) in ("aorta.cluster.cluster_json", "cluster_json"):
            return {key: value for key, value in data.items() if key not in ("plugin", "path")}
    return {}


def group_inventory(
    source: str, nodes: list[str], group: list[str], base: str, options: dict[str, Any]
) -> tuple[str, str]:
    """The group's own cluster file, ``base``.cluster.json (the campaign's less every other node,
    mode 0600: it may hold the SSH password), and a YAML source naming it, ``base``.aorta.yml (read
    by the collection's inventory plugin wherever ansible.cfg does not enable it for a bare .json),
    beside the group_vars and host_vars the campaign's file has. Returns (source, cluster file)."""
    keep = set(group)
    cluster = base + ".cluster.json"
    write_text_atomic(cluster, healthy_cluster(source, [n for n in nodes if n not in keep]), 0o600)
    inventory = base + ".aorta.yml"
    text = yaml.safe_dump({"plugin": "aorta.cluster.cluster_json", "path": cluster, **options}, sort_keys=False)
    write_text_atomic(inventory, "---\n" + text, 0o600)  # the source's own options, whatever they hold
    here = os.path.dirname(cluster)
    for name in INVENTORY_DIRS:
        found, link = os.path.join(os.path.dirname(os.path.abspath(source)), name), os.path.join(here, name)
        if os.path.isdir(found) and not os.path.lexists(link):
            os.symlink(found, link)
    return inventory, cluster


def group_result(
    where: str, nodes: list[str], code: int | None, log: str, campaign_dir: str, run_id: str
) -> dict[str, Any]:
    """What a group's run left (_figures.group_run, with ``recorded``), or, where it wrote no run.json
    of its own id, a FAILED group that says where its console went (a run.json of another id is an
    earlier run's, never this group's)."""
    record = read_json_object(os.path.join(where, "run.json")) or {}
    recorded = record.get("run_id") == run_id
    if not recorded:
        said = "never started (the campaign was stopped)" if code is None else f"exited {code} with no run.json"
        record = {
            "run_id": run_id,
            "status": "STOPPED" if code is None else "FAILED",
            "nodes": [{"name": node, "rank": rank} for rank, node in enumerate(nodes)],
            "message": f"its ansible-playbook {said}; see {log}",
        }
    report = read_json_object(os.path.join(where, REPORT)) if recorded else None
    return dict(_figures.group_run(record, report, os.path.relpath(where, campaign_dir)), recorded=recorded)


def earlier_campaign(where: str) -> str:
    """What of an earlier campaign ``where`` holds ('' when nothing): its record, or its groups'
    directories (one killed before it recorded), whose run.json files would be read as this one's."""
    if os.path.exists(os.path.join(where, "campaign.json")):
        return "campaign.json"
    try:
        found = sorted(name for name in os.listdir(where) if _campaign_ids.RUNG_DIR.fullmatch(name))
    except OSError:
        return ""
    return ", ".join(found)


def stopper(parent: int) -> Any:
    """Whether the campaign must stop, read at each poll: its first Ctrl-C or SIGTERM
    (plugin_utils/watch/_interrupt), or ansible-playbook gone (an AWX cancel kills its process group,
    which this worker, in a session of its own, is not part of: it must not go on alone)."""

    def stop_requested() -> bool:
        return _interrupt.requested() is not None or os.getppid() != parent

    return stop_requested


class ActionModule(Step):
    _requires_connection = False
    _VALID_ARGS: frozenset[str] = frozenset()

    def _inputs(self, task_vars: dict[str, Any]) -> dict[str, Any]:
        """Everything the campaign needs before it runs a group, each checked (ValueError, AnsibleError,
        RunStartError or LadderError naming the variable): settings, id and directory, the nodes in
        rank order, their cluster file, the options each group repeats and the ansible-playbook to run."""
        values = {name: self._variable(task_vars, name) for name in (*PLACES, *SETTINGS) if name in task_vars}
        settings = checked(values)
        now = dt.datetime.now(dt.timezone.utc)
        places = start({name: values.get(name) or "" for name in PLACES}, now, os.getcwd())
        hostvars = task_vars.get("hostvars") or {}
        listed = [str(n) for n in (task_vars.get("groups") or {}).get("aorta_nodes") or []]
        nodes = in_rank_order(self._templar.template, hostvars, listed)
        if not nodes:
            raise ValueError("aorta_nodes: the inventory has no node to run the campaign on")
        source = str(self._templar.template(hostvars.get(nodes[0], {}).get("aorta_cluster_file") or ""))
        if not source:
            raise ValueError(
                "aorta_cluster_file: the scaling campaign gives each group a cluster file of its own, so its "
                "nodes must come from a CVS cluster file (-i cluster.json: the inventory plugin "
                "aorta.cluster.cluster_json)"
            )
        campaign_id = places["aorta_run_id_resolved"]
        if len(campaign_id) > ID_MAX:
            raise ValueError(
                f"aorta_run_id: {campaign_id!r} is {len(campaign_id)} characters; a campaign's id is at most {ID_MAX} "
                "(each group's run id adds -k<size>-g<i> to it, and a run id is at most 64)"
            )
        if settings["aorta_scaling_seed"] is None:
            settings["aorta_scaling_seed"] = zlib.crc32(campaign_id.encode()) % 100000
        return {
            "settings": settings,
            "id": campaign_id,
            "dir": places["aorta_results_dir_resolved"],
            "nodes": nodes,
            "source": source,
            "options": _children.repeated_options(context.CLIARGS),
            "source_options": source_options(context.CLIARGS.get("inventory")),
            # Nodes read from -e aorta_cluster_file (AWX's survey): each group's run is given its own file
            # the same way (an inventory holding nodes beside that variable is refused by inventory_guard).
            "by_variable": bool(self._variable(task_vars, "aorta_cluster_file")),
            "playbook": _children.executable(sys.argv[0], shutil.which),
            # The history's fingerprints, should the campaign's row be the first in a root without index.json.
            "ignore": [str(key) for key in self._variable(task_vars, "aorta_baseline_ignore") or ()],
        }

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        try:
            plan = self._inputs(task_vars or {})
        except (ValueError, AnsibleError, RunStartError, _ladder.LadderError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        campaign_id, where, nodes, settings = plan["id"], plan["dir"], plan["nodes"], plan["settings"]
        earlier = earlier_campaign(where)
        if earlier:
            said = (
                f"aorta_results_dir: {where} holds a campaign already ({earlier}); a campaign writes "
                "nothing over another's runs: leave aorta_run_id and aorta_results_dir out, or name a new directory"
            )
            result.update(failed=True, msg=said)
            return result
        result.update(campaign_id=campaign_id, results_dir=where)
        if self._task.check_mode:
            # Each rung after the first depends on what the rung before named: only the ladder is known.
            sizes = _ladder.sizes(len(nodes), settings["aorta_scaling_sizes"])
            result.update(changed=False, sizes=sizes)
            result["msg"] = f"--check: campaign {campaign_id} would run rungs {sizes} on {len(nodes)} nodes"
            return result
        say = _console.printer(where, display.display)
        make_dirs(where)
        # A second Ctrl-C leaves, naming the stop that ends every group's run: the campaign's id (run_attach).
        _interrupt.note_run(campaign_id, len(nodes))
        say(
            f"scaling campaign {campaign_id} on {len(nodes)} nodes (seed {settings['aorta_scaling_seed']}); "
            f"results in {where}"
        )
        stop_requested = stopper(os.getppid())
        started = time.time()
        try:
            runner = self._runner(plan, say, stop_requested)
            document = _rungs.campaign(campaign_id, nodes, settings, runner, stop_requested, say)
        except (_ladder.LadderError, ClusterFileError, OSError, _children.ChildError) as exc:
            result.update(failed=True, msg=f"campaign {campaign_id}: {exc}")
            return result
        document.update(started_epoch=round(started, 3), finished_epoch=round(time.time(), 3))
        paths = self.write(where, document)
        root = os.path.dirname(os.path.abspath(where.rstrip("/")))
        try:  # the results root's history: a row for the campaign (its record is written already)
            paths["history"] = _history.update_campaign(root, where, document, plan["ignore"])["index_html"]
        except OSError as exc:
            result.setdefault("warnings", []).append(f"{root}: history not updated: {exc.strerror or exc}")
        verdict = document["verdict"]
        line = f"campaign {campaign_id}: {verdict['verdict']}"
        line += f": {'; '.join(verdict['reasons'])}" if verdict["reasons"] else ""
        say(line[:600])
        history = paths.get("history", "not updated")
        say(f"campaign record: {paths['campaign']}; page: {paths['page']}; history: {history}")
        result.update(changed=True, verdict=verdict, paths=paths)
        if verdict["verdict"] != "PASS":  # a stopped campaign's verdict says so (FAIL)
            result.update(failed=True, msg=line[:600])
        return result

    @staticmethod
    def _runner(plan: dict[str, Any], say: Any, stop_requested: Any) -> Any:
        """run_groups for _rungs.campaign: each group's cluster file, argv and console log, then every
        group of the rung through _children.run_all, then what each left."""
        where, parallel = plan["dir"], plan["settings"]["aorta_scaling_parallel"]

        def run_groups(label: str, groups: list[list[str]]) -> list[dict[str, Any]]:
            rung_dir = os.path.join(where, label)
            os.makedirs(rung_dir, exist_ok=True)
            jobs, dirs, ids = [], [], []
            for number, group in enumerate(groups):
                base = os.path.join(rung_dir, f"g{number}")
                inventory, cluster = group_inventory(plan["source"], plan["nodes"], group, base, plan["source_options"])
                run_id = _campaign_ids.group_run_id(plan["id"], label, number)
                ids.append(run_id)
                argv = _children.child_argv(
                    plan["playbook"],
                    cluster if plan["by_variable"] else inventory,
                    plan["options"],
                    run_id,
                    base,
                    plan["by_variable"],
                )
                jobs.append((argv, base + ".console.log"))
                dirs.append(base)
            size = len(groups[0]) if groups else 0
            say(f"{label}: {plural(len(groups), 'group')} of {size}, {min(len(groups), parallel)} at once")

            def was_stopped(index: int) -> bool:  # aorta.cluster.stop ended this group's run
                record = read_json_object(os.path.join(dirs[index], "run.json")) or {}
                outside = _campaign_ids.STOP_WORDS in str(record.get("message") or "")
                return record.get("run_id") == ids[index] and (record.get("status") == "STOPPED" or outside)

            codes, _stopped = _children.run_all(jobs, parallel, stop_requested, was_stopped=was_stopped)
            found = [
                group_result(d, g, c, j[1], where, i)
                for d, g, c, j, i in zip(dirs, groups, codes, jobs, ids, strict=True)
            ]
            if found and not any(run["recorded"] for run in found) and not stop_requested():
                # What every group shares failed (a vault, an option, the controller): no node's fault.
                raise _children.ChildError(
                    f"{label}: no group's run recorded anything (each ansible-playbook stopped before its run "
                    f"began); no node is named for it. The first one's output: {jobs[0][1]}"
                )
            return found

        return run_groups

    @staticmethod
    def write(where: str, document: dict[str, Any]) -> dict[str, str]:
        """campaign.json, junit.xml and scaling.html in the campaign's directory."""
        paths = {name: os.path.join(where, name) for name in ("campaign.json", "junit.xml", "scaling.html")}
        write_text_atomic(paths["campaign.json"], json.dumps(document, indent=2, default=str) + "\n", 0o644)
        verdict = document["verdict"]
        run = {
            "run_id": document["campaign_id"],
            "status": "STOPPED" if document.get("stopped") else "COMPLETED",
            "verdict": verdict,
        }
        cases = [
            _junit.case(c["classname"], c["name"], "failure" if c["failure"] else "", c["failure"])
            for c in _document.cases(document)
        ]
        write_text_atomic(paths["junit.xml"], _junit.document_xml(run, cases), 0o644)
        write_text_atomic(paths["scaling.html"], _scaling_page.render_html(document), 0o644)
        return {"campaign": paths["campaign.json"], "junit": paths["junit.xml"], "page": paths["scaling.html"]}
