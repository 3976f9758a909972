# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The history of the runs under a results root (controller side).

Private to this collection; standard library only. Each run leaves ``<root>/<run id>/run.json``
(and, when its traces were analysed, ``aorta_benchmark_report.json`` and ``report.html``); the
history is ``<root>/index.json`` (a row per run, newest first, with its fingerprint: results/
_fingerprint) and ``<root>/index.html`` (pages/_history_page: the same Jinja2 environment as the
report). ``aorta_baseline: auto`` reads these rows to choose a run to compare with (results/_judging).

A scaling campaign (plugin_utils/campaign) leaves ``<root>/<campaign id>/campaign.json``: its row is
kept apart, under the index's ``campaigns`` (never a baseline, never in a fingerprint's trend), and
index.html lists the campaigns above the runs. Its groups' runs have histories of their own, one per
rung (``<campaign dir>/k<size>/index.html``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object, write_text_atomic
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages._history_page import render_html
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._fingerprint import (
    fingerprint,
    fingerprint_id,
    overrides_of,
)

RUN_JSON = "run.json"
CAMPAIGN_JSON = "campaign.json"
REPORT_JSON = "aorta_benchmark_report.json"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
SCALING_HTML = "scaling.html"
INDEX_JSON = "index.json"
INDEX_HTML = "index.html"
LOCK = ".index.lock"
# 2: each distinct effective config once, under ``configs`` (keyed by its digest), the rows'
# fingerprints referring to it (``effective_ref``); rows of format 1 are read as they are.
INDEX_FORMAT = 2


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _verdict(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or not value.get("verdict"):
        return None
    reasons = value.get("reasons")
    listed = [str(r) for r in reasons] if isinstance(reasons, list) else []
    return {"verdict": str(value["verdict"]), "reasons": listed}


def _report_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    """What a row takes of ``aorta_benchmark_report.json``."""
    performance, summary = _dict(report.get("performance")), _dict(report.get("run"))
    slow = [str(_dict(n).get("node")) for n in report.get("slow_nodes") or () if isinstance(n, Mapping)]
    ranks = [_dict(s).get("rank") for s in report.get("stragglers") or () if isinstance(s, Mapping)]
    return {
        "report_status": report.get("status"),
        "samples_per_second": _number(summary.get("samples_per_second")),
        "tokens_per_second": _number(summary.get("tokens_per_second")),
        "step_time_ms": _number(performance.get("avg_step_time_ms")),
        "iteration_time_ms": _number(performance.get("avg_iteration_time_ms")),
        "slow_nodes": slow,
        "straggler_ranks": [r for r in ranks if isinstance(r, int)],
        "baseline_verdict": _dict(report.get("baseline")).get("verdict"),
    }


def _links(run_dir: str, relative: str) -> dict[str, str]:
    """Links, relative to the root, to the run's files that exist."""
    found = {}
    for key, name in (("report", REPORT_HTML), ("run_json", RUN_JSON), ("junit", JUNIT_XML)):
        if os.path.isfile(os.path.join(run_dir, name)):
            found[key] = f"{relative}/{name}"
    return found


def _relative(directory: str, root: str | None) -> str:
    """``directory`` relative to ``root`` (the directory above it by default), with '/' between parts."""
    base = root if root is not None else os.path.dirname(os.path.abspath(directory))
    return os.path.relpath(os.path.abspath(directory), os.path.abspath(base)).replace(os.sep, "/")


def entry(
    run_dir: str,
    ignore: Iterable[str] = (),
    root: str | None = None,
    run: Mapping[str, Any] | None = None,
    report: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """One history row from the run directory ``run_dir``; None when it holds no readable run.json.
    Links and ``dir`` are relative to ``root`` (the directory above ``run_dir`` by default). ``run``
    and ``report``: its run.json and report as the caller already read them (run_outcome); read
    from ``run_dir`` when not given."""
    if run is None:
        run = read_json_object(os.path.join(run_dir, RUN_JSON))
    if not isinstance(run, Mapping):
        return None
    relative = _relative(run_dir, root)
    if report is None:
        report = read_json_object(os.path.join(run_dir, REPORT_JSON))
    has_report = isinstance(report, Mapping)
    context = _dict(run.get("context"))
    fp = fingerprint(run, ignore)
    drift = [_dict(d) for d in run.get("drift") or () if isinstance(d, Mapping)]
    nodes = context.get("nodes")
    return {
        "run_id": str(run.get("run_id") or os.path.basename(relative)),
        "dir": relative,
        "started_epoch": _number(run.get("started_epoch")),
        "finished_epoch": _number(run.get("finished_epoch")),
        "status": run.get("status"),
        "message": run.get("message"),
        "verdict": _verdict(run.get("verdict")),
        "nodes": nodes if isinstance(nodes, int) else len(fp["nodes"]),
        "gpus_per_node": context.get("gpus_per_node"),
        "image": context.get("image"),
        "image_id": fp["image_id"],
        "has_report": has_report,
        **_report_figures(report or {}),
        "drift": len(drift),
        "drift_lines": [f"{d.get('label')}: {d.get('count')} of {d.get('of')} nodes differ" for d in drift],
        "links": _links(run_dir, relative),
        "config": {"base_config": context.get("base_config"), "overrides": overrides_of(context.get("overrides"), ())},
        "fingerprint": fp,
        "fingerprint_id": fingerprint_id(fp),
    }


def campaign_entry(
    campaign_dir: str, root: str | None = None, document: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """One campaign's row from its ``campaign.json`` (``document`` when the caller has it): who, when,
    the verdict, the rungs, the nodes named, rung 1's rate per node and the top rung's efficiency;
    None when there is no readable campaign.json."""
    if document is None:
        document = read_json_object(os.path.join(campaign_dir, CAMPAIGN_JSON))
    if not isinstance(document, Mapping):
        return None
    relative = _relative(campaign_dir, root)
    rungs = [_dict(r) for r in document.get("rungs") or () if isinstance(r, Mapping)]
    alone = next((r for r in rungs if r.get("size") == 1), {})
    links = {}
    for key, name in (("page", SCALING_HTML), ("campaign_json", CAMPAIGN_JSON), ("junit", JUNIT_XML)):
        if os.path.isfile(os.path.join(campaign_dir, name)):
            links[key] = f"{relative}/{name}"
    nodes, left = document.get("nodes"), document.get("left")
    return {
        "campaign_id": str(document.get("campaign_id") or os.path.basename(relative)),
        "dir": relative,
        "started_epoch": _number(document.get("started_epoch")),
        "finished_epoch": _number(document.get("finished_epoch")),
        "status": "STOPPED" if document.get("stopped") else "COMPLETED",
        "verdict": _verdict(document.get("verdict")),
        "nodes": len(nodes) if isinstance(nodes, list) else None,
        "left": len(left) if isinstance(left, list) else None,
        "sizes": [r.get("size") for r in rungs],
        "per_node_rate": _number(alone.get("samples_per_second_per_node")),
        "top_efficiency": _number(rungs[-1].get("efficiency")) if rungs else None,
        "named": [str(_dict(n).get("node")) for n in document.get("named") or () if isinstance(n, Mapping)],
        "links": links,
    }


def _newest_first(row: Mapping[str, Any]) -> tuple[float, str]:
    started = _number(row.get("started_epoch"))
    return (-(started if started is not None else float("-inf")), str(row.get("run_id") or row.get("campaign_id")))


def _sorted(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in sorted(rows, key=_newest_first)]


# ----------------------------------------------------------------------------------------------
# index.json and index.html


@contextlib.contextmanager
def _locked(root: str) -> Iterator[None]:
    """The root's history held by this process alone (two runs may end at once)."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, LOCK), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _scan(root: str, ignore: Sequence[str]) -> list[dict[str, Any]]:
    """A row per ``*/run.json`` one level under ``root``."""
    rows = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        if os.path.isfile(os.path.join(root, name, RUN_JSON)):
            row = entry(os.path.join(root, name), ignore, root)
            if row is not None:
                rows.append(row)
    return rows


def _scan_campaigns(root: str) -> list[dict[str, Any]]:
    """A row per ``*/campaign.json`` one level under ``root``."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    rows = [campaign_entry(os.path.join(root, name), root) for name in names]
    return [row for row in rows if row is not None]


def _indexed_campaigns(root: str) -> list[dict[str, Any]] | None:
    """The campaigns' rows of ``<root>/index.json``; None when there is no index this module can read."""
    index = read_json_object(os.path.join(root, INDEX_JSON))
    if not isinstance(index, Mapping) or not isinstance(index.get("runs"), list):
        return None
    return [dict(r) for r in index.get("campaigns") or () if isinstance(r, Mapping) and r.get("dir")]


def _indexed(root: str) -> list[dict[str, Any]] | None:
    """The rows of ``<root>/index.json``, each fingerprint's effective config put back in place of
    its reference; None when there is no index this module can read."""
    index = read_json_object(os.path.join(root, INDEX_JSON))
    if not isinstance(index, Mapping) or not isinstance(index.get("runs"), list):
        return None
    configs = _dict(index.get("configs"))
    rows = []
    for row in (dict(r) for r in index["runs"] if isinstance(r, Mapping) and r.get("dir")):
        fp = _dict(row.get("fingerprint"))
        ref = _dict(fp.get("config")).get("effective_ref")
        if isinstance(ref, str) and isinstance(configs.get(ref), Mapping):
            row["fingerprint"] = {**fp, "config": {"effective": configs[ref]}}
        rows.append(row)
    return rows


def _stored(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(each distinct effective config once, by its digest; the rows referring to them): a cluster's
    runs share a few configs, so index.json does not grow by a whole config per run."""
    configs: dict[str, Any] = {}
    stored = []
    digests: dict[int, str] = {}  # rows read from the index share their config's one object
    for row in rows:
        fp = _dict(row.get("fingerprint"))
        effective = _dict(fp.get("config")).get("effective")
        if isinstance(effective, Mapping):
            ref = digests.get(id(effective)) or fingerprint_id({"effective": effective})
            digests[id(effective)] = ref
            configs[ref] = effective
            stored.append({**row, "fingerprint": {**fp, "config": {"effective_ref": ref}}})
        else:
            stored.append(row)
    return configs, stored


def _publish(root: str, rows: list[dict[str, Any]], campaigns: list[dict[str, Any]]) -> dict[str, Any]:
    """Write index.json and index.html from ``rows`` and ``campaigns`` (each newest first); the
    caller holds the lock."""
    paths = {"index_json": os.path.join(root, INDEX_JSON), "index_html": os.path.join(root, INDEX_HTML)}
    configs, stored = _stored(rows)
    document = {"format": INDEX_FORMAT, "updated_epoch": int(time.time()), "configs": configs, "runs": stored}
    if campaigns:
        document["campaigns"] = campaigns
    write_text_atomic(paths["index_json"], json.dumps(document, separators=(",", ":"), sort_keys=True, default=str))
    write_text_atomic(paths["index_html"], render_html(rows, campaigns))
    return {**paths, "runs": len(rows), "campaigns": len(campaigns)}


def _campaigns(root: str) -> list[dict[str, Any]]:
    """The campaigns' rows: from index.json when it can be read, else from every campaign directory."""
    found = _indexed_campaigns(root)
    return _sorted(found if found is not None else _scan_campaigns(root))


def update(
    root: str,
    run_dir: str,
    ignore: Iterable[str] = (),
    run: Mapping[str, Any] | None = None,
    report: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Add or replace the row of the run in ``run_dir`` in ``<root>/index.json`` and rewrite
    ``<root>/index.html``, under the root's lock. Reads the index, not every run directory; only
    when there is no readable index.json yet is every run under ``root`` read once. Returns
    ``{index_json, index_html, runs, added}`` (``added`` False when ``run_dir`` has no readable
    run.json: the files are rewritten without it). ``run`` and ``report`` as ``entry`` takes them."""
    patterns = tuple(ignore)
    with _locked(root):
        rows = _indexed(root)
        if rows is None:
            rows = _scan(root, patterns)
        row = entry(run_dir, patterns, root, run, report)
        if row is not None:
            rows = [r for r in rows if r.get("dir") != row["dir"]]
            rows.append(row)
        return {**_publish(root, _sorted(rows), _campaigns(root)), "added": row is not None}


def update_campaign(
    root: str, campaign_dir: str, document: Mapping[str, Any], ignore: Iterable[str] = ()
) -> dict[str, Any]:
    """Add or replace the campaign's row (its ``campaign.json`` ``document``, in ``campaign_dir``) in
    ``<root>/index.json`` and rewrite ``<root>/index.html``, under the root's lock; the runs' rows
    are kept as they are (read from each run, with ``ignore`` as ``update`` takes it, where there is
    no index yet). Returns ``{index_json, index_html, runs, campaigns}``."""
    with _locked(root):
        rows = _indexed(root)
        if rows is None:
            rows = _scan(root, tuple(ignore))
        row = campaign_entry(campaign_dir, root, document)
        campaigns = [c for c in _campaigns(root) if row is None or c.get("dir") != row["dir"]]
        return _publish(root, _sorted(rows), _sorted([*campaigns, *([row] if row else [])]))


def rebuild(root: str, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """index.json and index.html made again from every ``*/run.json`` and ``*/campaign.json`` one
    level under ``root``, under the root's lock. Returns ``{index_json, index_html, runs, campaigns}``."""
    patterns = tuple(ignore)
    with _locked(root):
        return _publish(root, _sorted(_scan(root, patterns)), _sorted(_scan_campaigns(root)))


def indexed_rows(root: str, ignore: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every run's row under ``root``, newest first: from index.json when there is one this module
    can read, else from every run directory."""
    rows = _indexed(root)
    return _sorted(rows if rows is not None else _scan(root, tuple(ignore)))
