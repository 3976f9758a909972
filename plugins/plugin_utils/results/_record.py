# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One run's record from every node's registered results, each figure computed once (controller side).

Private to this collection. aorta.cluster.run_record writes run.json, unhealthy.txt and
healthy.cluster.json from these and prints the end lines; the nodes' results are read through
_node_results (``host_values``: each node once).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import STOP_WORDS
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import healthy_cluster
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._health_verdict import health_record, unhealthy_text
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._run_context import effective_config, run_settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._diagnosis import diagnose_run
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._node_results import (
    _vars,
    head,
    head_launch,
    nodes_of,
    nproc,
    setup_stopped,
)
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._run import (
    clip,
    node_setup_failure,
    node_table,
    run_status,
    setup_failure,
)


def _dict(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else ``{}``: what Jinja's ``(x | default({})).key`` reads."""
    return value if isinstance(value, Mapping) else {}


def node_row(host: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """One node's row of run.json: what preflight found (fabric interface, fingerprint, health),
    under what node_end recorded (``aorta_end.node_result``); a node that never ended is
    ``not_started``."""
    derived = _dict(_dict(values.get("aorta_prepare")).get("derived"))
    row = {
        "name": host,
        "rank": values.get("aorta_node_rank"),
        "mgmt_ip": values.get("aorta_mgmt_ip", host),
        "vpc_ip": values.get("aorta_vpc_ip"),
        "fabric_if": derived.get("fabric_if", ""),
        "fingerprint": derived.get("fingerprint"),
        "health": derived.get("health"),
        "state": "not_started",
        "exit_code": None,
        "log": None,
    }
    row.update(_dict(_dict(values.get("aorta_end")).get("node_result")))
    return row


def node_rows(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """run.json's ``nodes``: a row per node of aorta_nodes, in its order."""
    return [node_row(host, _vars(hostvars, host)) for host in nodes_of(groups)]


def setup_failures(rows: Sequence[Mapping[str, Any]], hostvars: Mapping[str, Any]) -> tuple[list, list]:
    """([what stopped each row's node's setup], [whether by its own task]) from the launch play's
    rescue (its failed task and result, kept per node); '' and False where setup did not stop."""
    found = []
    for row in rows:
        values = _vars(hostvars, row.get("name"))
        found.append(
            node_setup_failure(
                str(row.get("name")), values.get("aorta_node_setup_task"), values.get("aorta_node_setup_result")
            )
        )
    return [message for message, _own in found], [own for _message, own in found]


def health(rows: Sequence[Mapping[str, Any]], hostvars: Mapping[str, Any], sweep: Mapping[str, Any]) -> dict[str, Any]:
    """The nodes' health together (``health_record``): their fingerprints' drift and the nodes whose
    own preflight failed, from each row's node's preflight result and rescue, and the fabric sweep's
    (``fabric_sweep``: run.json's, whose nodes below aorta_fabric_min_gbps are unhealthy too)."""
    per_node = [_vars(hostvars, row.get("name")) for row in rows]
    messages, own = setup_failures(rows, hostvars)
    prepared = [_dict(values.get("aorta_prepare")) for values in per_node]
    found = health_record(rows, prepared, messages, own)
    # Those preflight excluded (aorta_exclude_unhealthy), for run.json when no launch said it (too
    # few were left to launch): the same entries as in ``unhealthy``.
    left_out = {str(row.get("name")) for row, answer in zip(rows, prepared) if answer.get("excluded")}
    found["excluded"] = [item for item in found["unhealthy"] if item["name"] in left_out]
    found["fabric_sweep"] = dict(sweep)
    slow = below_min_gbps(rows, found["fabric_sweep"])
    if slow:
        found["unhealthy"] = [*found["unhealthy"], *slow]
        found["unhealthy_text"] = unhealthy_text(found["unhealthy"])
    return found


def below_min_gbps(rows: Sequence[Mapping[str, Any]], sweep: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nodes whose best fabric sweep figure in a direction is below aorta_fabric_min_gbps (the
    head stops such a run before its ranks start): unhealthy, so that the next run leaves them out."""
    minimum = sweep.get("min_gbps")
    if not isinstance(minimum, (int, float)) or minimum <= 0:
        return []
    found = []
    for row in rows:
        own = _dict(row.get("fabric_sweep"))
        low = [
            f"fabric sweep: {verb} at {own[key]:g} Gbit/s at best, below aorta_fabric_min_gbps {minimum:g}"
            for key, verb in (("send_gbps", "sends"), ("recv_gbps", "receives"))
            if isinstance(own.get(key), (int, float)) and own[key] < minimum
        ]
        if low:
            found.append({"name": str(row.get("name")), "reasons": low})
    return found


def status(
    rows: Sequence[Mapping[str, Any]],
    failure_message: Any = "",
    failure_nodes: Any = (),
    hostvars: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's ``{status, message, failed_nodes, first_failure}``: FAILED with the setup's own
    message and nodes when setup stopped before the launch (given, or, when the nodes' rescue ran
    (``setup_stopped``), read from each node's rescue in ``hostvars``), else what the rows say."""
    names = [row.get("name") for row in rows]
    if not failure_message and hostvars is not None and setup_stopped(hostvars, names):
        messages, own = setup_failures(rows, hostvars)
        stopped = setup_failure([str(row.get("name")) for row in rows], messages, own)
        failure_message, failure_nodes = stopped["message"], stopped["failed_nodes"]
    if failure_message:
        failed = [str(name) for name in failure_nodes or ()]
        return {
            "status": "FAILED",
            "failed_nodes": failed,
            "first_failure": failed[0] if failed else None,
            "message": failure_message,
        }
    return run_status(rows)


def stopped_status(stop: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """STOPPED: the user interrupted the run on the controller (plugin_utils/watch/_interrupt.py). No node
    failed: ``stopped`` says why, when (``at``, ``signal``), in which phase, and the steps each node
    reached (its slowest rank's; nodes that never trained are left out)."""
    steps = {}
    for row in rows:
        progress = [value for value in _dict(row.get("progress")).values() if isinstance(value, int)]
        if progress:
            steps[str(row.get("name"))] = min(progress)
    phase = str(stop.get("phase") or "while collecting")
    reason = str(stop.get("reason") or "stopped from the controller")
    reached = f"; steps reached {min(steps.values())} to {max(steps.values())}" if steps else ""
    return {
        "status": "STOPPED",
        "failed_nodes": [],
        "first_failure": None,
        "message": f"STOPPED by the user {phase}: {reason}{reached}",
        "stopped": {
            "reason": reason,
            "signal": stop.get("signal"),
            "at": stop.get("at"),
            "phase": phase,
            "steps": steps,
        },
    }


def stop_from_outside(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """aorta.cluster.stop by the run's id (or its campaign's), from any controller: the head's
    aggregator stopped every node, each supervisor saying why (``cluster_stop`` of kind ``stopped``).
    Not a failure of the nodes: the run is STOPPED, as the controller's own Ctrl-C leaves it."""
    for row in rows:
        stop = _dict(row.get("cluster_stop"))
        reason = str(stop.get("reason") or "")
        if stop.get("kind") == "stopped" and reason.startswith(STOP_WORDS):
            return {"reason": reason, "phase": "while training", "signal": None, "at": None}
    return None


def diagnosis(results_dir: str, run_state: str, rows: list[Mapping[str, Any]], ranks_per_node: int | None) -> dict:
    """Why the run stopped (``diagnose_run``); ranks per node 1 when no launch said (setup stopped
    first: no rank evidence exists then anyway)."""
    try:
        return diagnose_run(results_dir, run_state, rows, max(1, ranks_per_node or 1))
    except Exception as exc:  # the diagnosis informs; a bug in it must not cost the run its run.json
        return {
            "kind": "none",
            "behind": [],
            "waiting": "",
            "method": "undetermined",
            "evidence": [],
            "node_errors": [],
            "problems": [f"the diagnosis itself failed: {type(exc).__name__}: {exc}"],
            "summary": f"{run_state}: no diagnosis ({type(exc).__name__}: {exc})",
        }


def context(settings: Mapping[str, Any], hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> dict:
    """What ran, with what (run.json's ``context``): the image and config the run was given, and what
    the head's preflight and launch found (image id, launch mode, node and rank counts, the
    effective config's batch size and sequence length, and the effective config itself, flattened)."""
    values = _vars(hostvars, head(hostvars, groups))
    launch = _dict(values.get("aorta_launch"))
    facts = _dict(_dict(values.get("aorta_prepare")).get("facts"))
    overrides = settings["aorta_training_overrides"]
    base_config = settings["aorta_base_config"]
    read = _dict(facts.get("read"))
    config_text = read.get("text", "")
    # A base config cut at the probe's read limit is not the whole config: no fingerprint of it.
    whole = "" if read.get("truncated") or read.get("error") else config_text
    # Script mode (launch_rocm.sh) passes no --override: the base config is the whole config.
    applied = {} if launch.get("launch_mode") == "script" else overrides
    return {
        "image": settings["aorta_docker_image"],
        "image_id": facts.get("image_id"),
        "base_config": base_config,
        "overrides": overrides,
        "launch_mode": launch.get("launch_mode"),
        "nodes": launch.get("nnodes", len(nodes_of(groups))),
        "gpus_per_node": nproc(hostvars, groups),
        "settings": run_settings(config_text, applied, base_config),
        "effective_config": effective_config(whole, applied, base_config),
    }


def combined_traces(results_dir: str, collected: Mapping[str, Any]) -> dict[str, Any] | None:
    """run.json's ``combined_traces``: this run's collection (``aorta_combined``, with its manifest),
    else None."""
    if "manifest" not in collected:
        return None
    return {
        "path": f"{results_dir}/combined_traces",
        "files": collected.get("files"),
        "missing_ranks": collected.get("missing_ranks"),
        "nodes_not_collected": _dict(collected["manifest"]).get("nodes_not_collected"),
    }


LINK_ERRORS_NAMED = 3  # nodes named on the console's link-errors line before "and N more"


def link_errors(rows: Sequence[Mapping[str, Any]], at_least: int = 1) -> list[dict[str, Any]]:
    """The nodes whose fabric link's error counters grew by ``at_least`` (aorta_link_errors_min) or
    more during the run (each node's supervisor read them at the launch and at the end: run.json's
    ``nodes[].link``, which keeps any growth), a finding on that node: ``node``, ``interface``,
    ``grew`` ({counter: how many more})."""
    found = []
    for row in rows:
        link = _dict(row.get("link"))
        grew = {str(k): v for k, v in _dict(link.get("grew")).items() if isinstance(v, int) and v >= max(at_least, 1)}
        if grew:
            found.append({"node": row.get("name"), "interface": link.get("interface"), "grew": grew})
    return found


def link_errors_line(found: Sequence[Mapping[str, Any]]) -> list[str]:
    """One console line for them, whatever the node count; none when there are none."""
    if not found:
        return []
    named = first_names(
        (
            f"{item['node']} ({', '.join(f'{k} +{v}' for k, v in _dict(item.get('grew')).items())})"
            for item in found[:LINK_ERRORS_NAMED]
        ),
        LINK_ERRORS_NAMED,
        len(found),
    )
    nodes = f"{len(found)} node{'s' if len(found) != 1 else ''}"
    return [clip(f"fabric link errors grew during the run on {nodes}: {named} (run.json)")]


SWEEP_NAMED = 3  # slow nodes named on the console's fabric sweep line before "and N more"


def fabric_sweep(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """run.json's ``fabric_sweep``: the head's judgement of the sweep before the ranks started (its
    supervisor's ``fabric_sweep.cluster``, taken out of the head's row; each row keeps its own
    figures), or ``{"ran": false, "why"}``."""
    found = next((_dict(row["fabric_sweep"].get("cluster")) for row in rows if _has_cluster_sweep(row)), None)
    if found:
        return dict(found, ran=True)
    if not any(isinstance(row.get("fabric_sweep"), dict) for row in rows):
        return {"ran": False, "why": "no node swept: aorta_fabric_sweep off, or no node reached the go"}
    return {"ran": False, "why": "the head's judgement of the sweep is not in its status"}


def _has_cluster_sweep(row: Mapping[str, Any]) -> bool:
    return isinstance(row.get("fabric_sweep"), dict) and bool(row["fabric_sweep"].get("cluster"))


def own_sweep(row: dict[str, Any]) -> dict[str, Any]:
    """The row as run.json's ``nodes[]`` holds it: the cluster's sweep is run.json's own key."""
    if not _has_cluster_sweep(row):
        return row
    return dict(row, fabric_sweep={k: v for k, v in row["fabric_sweep"].items() if k != "cluster"})


def fabric_sweep_line(sweep: Mapping[str, Any]) -> list[str]:
    """One console line naming the nodes the sweep found slow; none when it found none."""
    slow = [_dict(item) for item in sweep.get("slow") or () if isinstance(item, Mapping)]
    if not slow:
        return []
    named = first_names(
        (
            f"{item.get('node')} ({item.get('direction')}: {item.get('send_gbps')}/{item.get('recv_gbps')} Gbit/s "
            f"sent/received, {item.get('ratio')}x)"
            for item in slow[:SWEEP_NAMED]
        ),
        SWEEP_NAMED,
        len(slow),
    )
    return [
        clip(
            f"fabric sweep ({sweep.get('tool')}): slow link on {named}, against a median of "
            f"{sweep.get('median_gbps')} Gbit/s (run.json's fabric_sweep)"
        )
    ]


def run_json(
    *,
    run_id: str,
    results_dir: str,
    run: Mapping[str, Any],
    why: Mapping[str, Any],
    what: Mapping[str, Any],
    rows: list[dict[str, Any]],
    health_found: Mapping[str, Any],
    launch: Mapping[str, Any],
    collected: Mapping[str, Any],
    collect_failure: Any,
    started_epoch: Any,
    finished_epoch: int,
    head_node: str | None = None,
) -> dict[str, Any]:
    """run.json's content: ``run`` is ``status()``, ``why`` ``diagnosis()``, ``what`` ``context()``,
    ``health_found`` ``health()``, ``launch`` the head's, ``collected`` combined_traces' result,
    ``head_node`` ``head()``."""
    return {
        "run_id": run_id,
        "status": run["status"],
        "message": run["message"],
        "failed_nodes": run["failed_nodes"],
        "first_failure": run.get("first_failure"),
        "started_epoch": started_epoch,
        "finished_epoch": finished_epoch,
        # The node that led the run (aorta_exclude_unhealthy may have elected a worker).
        "head": head_node,
        "master_addr": launch.get("master_addr"),
        "master_port": launch.get("master_port"),
        "excluded": launch.get("excluded_nodes") or health_found.get("excluded") or [],
        "diagnosis": why,
        "context": what,
        "nodes": rows,
        "drift": health_found["drift"],
        "link_errors": health_found.get("link_errors") or [],
        "fabric_sweep": health_found["fabric_sweep"],
        "unhealthy": health_found["unhealthy"],
        "combined_traces": combined_traces(results_dir, collected),
        "collection_error": collect_failure,
        "stopped": run.get("stopped"),
    }


def console_lines(
    run_id: str,
    results_dir: str,
    run: Mapping[str, Any],
    why: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    health_found: Mapping[str, Any],
    every_node: bool = False,
    dry_run: bool = False,
) -> list[str]:
    """What the run prints at its end: its status, why it stopped (unless it completed with no node
    error), a line per node that was not ok (every node with ``every_node``: -v) and one of counts,
    the drift, where the unhealthy nodes are listed, and where the results are. The status and why
    lines are cut at _run.MESSAGE_MAX characters (run.json holds the whole text); with every node
    unhealthy no healthy.cluster.json is written, and none is suggested. The advice is a command that
    works wherever the collection is installed (``-i`` of a raw .json needs the inventory plugin
    enabled, as only the checkout's ansible.cfg does); ``dry_run`` (--check): what a run would write."""
    lines = [clip(f"run {run_id}: {run['status']} - {run['message']}")]
    if run["status"] != "COMPLETED" or why.get("node_errors"):
        lines.append(clip(f"why: {why.get('summary')}"))
    lines += node_table(rows, every_node)
    lines += health_found["drift_lines"]
    lines += link_errors_line(health_found.get("link_errors") or [])
    lines += fabric_sweep_line(health_found["fabric_sweep"])
    unhealthy = {str(node.get("name")) for node in health_found["unhealthy"]}
    listed = "a run lists them in" if dry_run else "listed in"
    if unhealthy and rows and all(str(row.get("name")) in unhealthy for row in rows):
        lines.append(
            f"unhealthy: all {len(rows)} nodes, {listed} {results_dir}/unhealthy.txt (none left to re-run on)"
            + (" (--check: not written)" if dry_run else "")
        )
    elif unhealthy and dry_run:
        lines.append(
            f"unhealthy: {len(unhealthy)} nodes: {named_nodes(health_found['unhealthy'])} (--check: not written; "
            f"a run lists them in {results_dir}/unhealthy.txt and writes healthy.cluster.json without them)"
        )
    elif unhealthy:
        lines.append(
            f"unhealthy: {len(unhealthy)} nodes: {named_nodes(health_found['unhealthy'])}, listed in "
            f"{results_dir}/unhealthy.txt; without them: ansible-playbook aorta.cluster.aorta_multinode "
            f"-e aorta_cluster_file={results_dir}/healthy.cluster.json (and the run's other options)"
        )
    return [*lines, f"results: {results_dir}"]


NAMED_NODES = 5  # the console's line names this many unhealthy nodes; unhealthy.txt has every one


def named_nodes(found: Sequence[Mapping[str, Any]]) -> str:
    """The first unhealthy nodes by name and how many more: one bounded line at any node count."""
    return first_names((str(node.get("name")) for node in found), NAMED_NODES)


def awx_stats(
    run_id: str,
    results_dir: str,
    run: Mapping[str, Any],
    why: Mapping[str, Any],
    launch: Mapping[str, Any],
    collected: Mapping[str, Any],
) -> dict[str, Any]:
    """The task result's ``ansible_stats``, as set_stats makes it (once for the play, aggregated):
    AWX shows the data on the job and hands it to the next node of a workflow."""
    data = {
        "aorta_run_id": run_id,
        "aorta_run_status": run["status"],
        "aorta_failed_nodes": run["failed_nodes"],
        "aorta_excluded_nodes": [_dict(node).get("name") for node in launch.get("excluded_nodes") or []],
        "aorta_diagnosis": why.get("summary"),
        "aorta_results_dir": results_dir,
        "aorta_run_json": f"{results_dir}/run.json",
        # The same test as run.json's combined_traces: this run's collection wrote it.
        "aorta_manifest": f"{results_dir}/combined_traces/manifest.json" if "manifest" in collected else "",
    }
    return {"data": data, "per_host": False, "aggregate": True}


def cluster_source(hostvars: Mapping[str, Any], groups: Mapping[str, Any] | None) -> str:
    """The cluster file the nodes came from (the first node's ``aorta_cluster_file``), '' when they
    came from another inventory."""
    nodes = nodes_of(groups)
    return str(_vars(hostvars, nodes[0]).get("aorta_cluster_file") or "") if nodes else ""


def health_files(source: Any, health_found: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``[(file name, text)]`` to write beside run.json, each mode 0600 (healthy.cluster.json may hold
    the SSH password): unhealthy.txt every run (empty when every node is healthy), and, when the nodes
    came from a cluster file, healthy.cluster.json without the unhealthy nodes, unless that leaves
    none (no empty healthy.cluster.json is ever written). Raises ClusterFileError when that file
    cannot be read again."""
    files = [("unhealthy.txt", str(health_found["unhealthy_text"]))]
    if source:
        names = [str(node["name"]) for node in health_found["unhealthy"]]
        healthy = healthy_cluster(str(source), names)
        if json.loads(healthy).get("node_dict"):
            files.append(("healthy.cluster.json", healthy))
    return files


def record(
    settings: Mapping[str, Any],
    hostvars: Mapping[str, Any],
    groups: Mapping[str, Any] | None,
    finished_epoch: int,
    every_node: bool = False,
    diagnose: Callable[[str, str, list, int | None], dict] = diagnosis,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Everything run_record writes and returns, each figure computed once: ``rows``, ``health``,
    ``status``, ``diagnosis``, ``run_json``, ``lines`` and ``stats``. ``settings``: the aorta_*
    values run_record reads (the run id, results directory, setup failure, image and config, start);
    ``hostvars``: ``host_values`` of the nodes (NODE_VARS) and of localhost (LOCAL_VARS)."""
    run_id = str(settings["aorta_run_id_resolved"])
    results_dir = str(settings["aorta_results_dir_resolved"])
    rows = node_rows(hostvars, groups)
    # The head's row holds the cluster's sweep: run.json's own key, each row keeps its node's figures.
    sweep = fabric_sweep(rows)
    rows = [own_sweep(row) for row in rows]
    health_found = health(rows, hostvars, sweep)
    health_found["link_errors"] = link_errors(rows, int(settings.get("aorta_link_errors_min") or 1))
    run = status(rows, settings.get("aorta_run_failure_message"), settings.get("aorta_run_failure_nodes"), hostvars)
    # The nodes' own word first: a stop by id stopped them even where this controller's Ctrl-C came
    # after (a campaign hands its other groups their Ctrl-C once one group's run says it was stopped).
    stop = stop_from_outside(rows) or settings.get("aorta_stop_request")
    if stop:
        run = stopped_status(stop, rows)
    why = diagnose(results_dir, run["status"], rows, nproc(hostvars, groups))
    launch = head_launch(hostvars, groups)
    local = _vars(hostvars, "localhost")
    collected = _dict(local.get("aorta_combined"))
    document = run_json(
        run_id=run_id,
        results_dir=results_dir,
        run=run,
        why=why,
        what=context(settings, hostvars, groups),
        rows=rows,
        health_found=health_found,
        launch=launch,
        collected=collected,
        collect_failure=local.get("aorta_collect_failure"),
        started_epoch=settings.get("aorta_run_started_epoch"),
        finished_epoch=finished_epoch,
        head_node=head(hostvars, groups),
    )
    return {
        "rows": rows,
        "health": health_found,
        "status": run,
        "diagnosis": why,
        "run_json": document,
        "lines": console_lines(run_id, results_dir, run, why, rows, health_found, every_node, dry_run),
        "stats": awx_stats(run_id, results_dir, run, why, launch, collected),
    }
