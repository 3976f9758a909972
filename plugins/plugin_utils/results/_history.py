# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The history of the runs under a results root, and the earlier run a new one compares with
(controller side).

Private to this collection; standard library only. Each run leaves ``<root>/<run id>/run.json``
(and, when its traces were analysed, ``aorta_benchmark_report.json`` and ``report.html``); the
history is ``<root>/index.json`` (a row per run, newest first) and ``<root>/index.html`` (a table
of the rows and, per fingerprint, the step time and throughput across runs as inline SVG; no
JavaScript). A run's fingerprint is what makes two runs comparable: the nodes that ran, the image,
the ROCm and amdgpu versions, the GPUs per node and the effective Aorta config less the keys that
do not change a step's work. ``aorta_baseline: auto`` takes the newest COMPLETED run with a report
and the same fingerprint (``choose_baseline``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import html
import json
import os
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._settings import read_json_object, write_text_atomic
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError, override_tokens

RUN_JSON = "run.json"
REPORT_JSON = "aorta_benchmark_report.json"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
INDEX_JSON = "index.json"
INDEX_HTML = "index.html"
LOCK = ".index.lock"
# 2: each distinct effective config once, under ``configs`` (keyed by its digest), the rows'
# fingerprints referring to it (``effective_ref``); rows of format 1 are read as they are.
INDEX_FORMAT = 2
# Config keys that never change a step's work: how many steps, where the output goes, what is
# profiled, the stand-in's faults.
NEUTRAL_KEYS = ("training.max_steps", "training.output_dir", "profiling.*", "standin.*")
# What the page shows at most of one run's lists (reasons, drift, slow nodes): the rest is counted.
SHOWN = 3
MAX_TEXT = 160


# ----------------------------------------------------------------------------------------------
# fingerprint


def _ignored(key: str, patterns: Sequence[str]) -> bool:
    """Whether the dotted ``key`` is one of ``patterns``: the key itself, or a prefix ``a.b.*``
    (which also takes ``a.b``)."""
    for pattern in patterns:
        if pattern.endswith(".*"):
            stem = pattern[:-2]
            if key == stem or key.startswith(stem + "."):
                return True
        elif key == pattern:
            return True
    return False


def _overrides(overrides: Any, patterns: Sequence[str]) -> dict[str, str]:
    """The run's overrides as ``{dotted key: value as Aorta reads it}`` (a mapping, a list of
    ``key=value`` or an AWX survey's text all give the same), less the ``patterns``; overrides that
    do not parse are kept whole under ``""``: such a run is comparable only with the same text."""
    try:
        tokens = override_tokens(overrides)
    except LaunchError:
        return {"": str(overrides)}
    found = {}
    for token in tokens:
        key, value = token.split("=", 1)
        if not _ignored(key, patterns):
            found[key] = value
    return dict(sorted(found.items()))


def _values(nodes: Sequence[Mapping[str, Any]], field: str) -> list[str]:
    """The distinct values of the nodes' fingerprint ``field``, sorted; unread values left out."""
    found = set()
    for node in nodes:
        value = _dict(node.get("fingerprint")).get(field)
        if value not in (None, ""):
            found.add(str(value))
    return sorted(found)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ran(run: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """run.json's node rows less the nodes preflight excluded (``excluded``, state ``excluded``)."""
    excluded = {str(_dict(e).get("name")) for e in run.get("excluded") or ()}
    rows = [_dict(n) for n in run.get("nodes") or () if isinstance(n, Mapping)]
    return [n for n in rows if n.get("state") != "excluded" and str(n.get("name")) not in excluded]


def fingerprint(run: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """What makes two runs comparable (``run``: run.json): ``nodes`` (the sorted names of the nodes
    that ran, excluded ones left out), ``image_id`` (the context's, else the nodes' distinct ones
    joined by commas), ``gpus_per_node``, ``rocm`` and ``amdgpu`` (the nodes' distinct versions) and
    ``config``: ``effective`` (run.json's ``context.effective_config``: the base config as the head
    read it with the overrides applied) less ``NEUTRAL_KEYS`` (``training.max_steps``,
    ``training.output_dir``, ``profiling.*``, ``standin.*``) and ``ignore`` (dotted keys, or
    prefixes ending in ``.*``); a run.json without it (an earlier version's, or a base config the
    head could not read) gives ``base_config`` (its path) and ``overrides`` less the same keys."""
    context = _dict(run.get("context"))
    nodes = _ran(run)
    image_id = context.get("image_id") or ",".join(_values(nodes, "image_id")) or None
    gpus = context.get("gpus_per_node")
    patterns = (*NEUTRAL_KEYS, *ignore)
    effective = context.get("effective_config")
    if isinstance(effective, Mapping):
        config: dict[str, Any] = {"effective": _without(effective, patterns)}
    else:
        config = {
            "base_config": context.get("base_config"),
            "overrides": _overrides(context.get("overrides"), patterns),
        }
    return {
        "nodes": sorted(str(n.get("name")) for n in nodes),
        "image_id": str(image_id) if image_id else None,
        "gpus_per_node": gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
        "rocm": _values(nodes, "rocm"),
        "amdgpu": _values(nodes, "amdgpu"),
        "config": config,
    }


def _without(config: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """``config`` (dotted keys) less the keys ``patterns`` name, in key order."""
    return {key: config[key] for key in sorted(config) if not _ignored(str(key), patterns)}


def refine(fp: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """``fp`` less the overrides ``ignore`` names: a fingerprint kept in the index, made with fewer
    keys ignored, as ``fingerprint(run, ignore)`` would make it now."""
    patterns = (*NEUTRAL_KEYS, *ignore)
    config = _dict(fp.get("config"))
    if "effective" in config:
        return {**fp, "config": {"effective": _without(_dict(config["effective"]), patterns)}}
    overrides = {k: v for k, v in _dict(config.get("overrides")).items() if not _ignored(k, patterns)}
    return {**fp, "config": {**config, "overrides": overrides}}


def fingerprint_id(fp: Mapping[str, Any]) -> str:
    """A short stable name of ``fp``: 12 hex digits of the sha256 of its canonical JSON."""
    text = json.dumps(fp, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def short_id(image_id: Any) -> str:
    """An image id as people read it: ``sha256:`` and 12 hex digits."""
    if not image_id:
        return "(unknown)"
    text = str(image_id)
    return ",".join(p[:19] + "\u2026" if len(p) > 19 else p for p in text.split(","))


def _listed(names: Sequence[str], first: int = SHOWN) -> str:
    more = f" and {len(names) - first} more" if len(names) > first else ""
    return ", ".join(names[:first]) + more


def _text(values: Any) -> str:
    if isinstance(values, list):
        return ", ".join(str(v) for v in values) or "(unknown)"
    return "(unknown)" if values in (None, "") else str(values)


def differences(a_fp: Mapping[str, Any], b_fp: Mapping[str, Any]) -> list[str]:
    """One short line per part in which fingerprint ``a_fp`` (this run) differs from ``b_fp`` (the
    other), e.g. ``image id sha256:ab... vs sha256:cd...``, ``nodes: 10.0.0.3 only in this run``,
    ``override training.lr: 0.1 vs unset``; [] when they are the same."""
    lines = []
    if a_fp.get("image_id") != b_fp.get("image_id"):
        lines.append(f"image id {short_id(a_fp.get('image_id'))} vs {short_id(b_fp.get('image_id'))}")
    a_nodes, b_nodes = set(a_fp.get("nodes") or ()), set(b_fp.get("nodes") or ())
    if a_nodes != b_nodes:
        parts = [f"{len(a_nodes)} vs {len(b_nodes)}"]
        if a_nodes - b_nodes:
            parts.append(f"{_listed(sorted(a_nodes - b_nodes))} only in this run")
        if b_nodes - a_nodes:
            parts.append(f"{_listed(sorted(b_nodes - a_nodes))} only in the other")
        lines.append("nodes: " + "; ".join(parts))
    for key, label in (("gpus_per_node", "GPUs per node"), ("rocm", "ROCm"), ("amdgpu", "amdgpu")):
        if a_fp.get(key) != b_fp.get(key):
            lines.append(f"{label} {_text(a_fp.get(key))} vs {_text(b_fp.get(key))}")
    a_config, b_config = _dict(a_fp.get("config")), _dict(b_fp.get("config"))
    if "effective" in a_config and "effective" in b_config:
        return lines + _config_differences(_dict(a_config["effective"]), _dict(b_config["effective"]))
    if ("effective" in a_config) != ("effective" in b_config):
        return [*lines, "config: only one of the two runs recorded its effective config (an earlier version?)"]
    if a_config.get("base_config") != b_config.get("base_config"):
        lines.append(f"base config {_text(a_config.get('base_config'))} vs {_text(b_config.get('base_config'))}")
    a_over, b_over = _dict(a_config.get("overrides")), _dict(b_config.get("overrides"))
    for key in sorted(set(a_over) | set(b_over)):
        if a_over.get(key) != b_over.get(key):
            name = key or "(unparsed overrides)"
            lines.append(f"override {name}: {a_over.get(key, 'unset')} vs {b_over.get(key, 'unset')}")
    return lines


def _config_differences(a_config: Mapping[str, Any], b_config: Mapping[str, Any]) -> list[str]:
    """``config <key>: <this run's> vs <the other's>`` per dotted key that differs, at most
    ``SHOWN * 3`` and then a count."""
    keys = [k for k in sorted(set(a_config) | set(b_config)) if a_config.get(k, _UNSET) != b_config.get(k, _UNSET)]
    lines = [
        f"config {key}: {_value_text(a_config.get(key, _UNSET))} vs {_value_text(b_config.get(key, _UNSET))}"
        for key in keys[: SHOWN * 3]
    ]
    if len(keys) > SHOWN * 3:
        lines.append(f"config: {len(keys) - SHOWN * 3} more keys differ")
    return lines


_UNSET = object()


def _value_text(value: Any) -> str:
    if value is _UNSET:
        return "unset"
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:39] + "\u2026"


# ----------------------------------------------------------------------------------------------
# rows


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
    base = root if root is not None else os.path.dirname(os.path.abspath(run_dir))
    relative = os.path.relpath(os.path.abspath(run_dir), os.path.abspath(base)).replace(os.sep, "/")
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
        "config": {"base_config": context.get("base_config"), "overrides": _overrides(context.get("overrides"), ())},
        "fingerprint": fp,
        "fingerprint_id": fingerprint_id(fp),
    }


def _newest_first(row: Mapping[str, Any]) -> tuple[float, str]:
    started = _number(row.get("started_epoch"))
    return (-(started if started is not None else float("-inf")), str(row.get("run_id")))


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


def _publish(root: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write index.json and index.html from ``rows`` (newest first); the caller holds the lock."""
    paths = {"index_json": os.path.join(root, INDEX_JSON), "index_html": os.path.join(root, INDEX_HTML)}
    configs, stored = _stored(rows)
    document = {"format": INDEX_FORMAT, "updated_epoch": int(time.time()), "configs": configs, "runs": stored}
    write_text_atomic(paths["index_json"], json.dumps(document, separators=(",", ":"), sort_keys=True, default=str))
    write_text_atomic(paths["index_html"], render_html(rows))
    return {**paths, "runs": len(rows)}


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
        return {**_publish(root, _sorted(rows)), "added": row is not None}


def rebuild(root: str, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """index.json and index.html made again from every ``*/run.json`` one level under ``root``,
    under the root's lock. Returns ``{index_json, index_html, runs}``."""
    patterns = tuple(ignore)
    with _locked(root):
        return _publish(root, _sorted(_scan(root, patterns)))


# ----------------------------------------------------------------------------------------------
# the baseline


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _date(epoch: Any) -> str:
    number = _number(epoch)
    if number is None:
        return "start unknown"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(number))


def choose_baseline(root: str, run: Mapping[str, Any], ignore: Iterable[str] = ()) -> tuple[str | None, str]:
    """``aorta_baseline: auto``: the newest run under ``root`` (by ``started_epoch``, from index.json
    when there is one, else from every run directory) that started no later than ``run`` (run.json),
    is not ``run``, is COMPLETED, has an aorta_benchmark_report.json and has ``run``'s fingerprint.
    Returns (that run's directory, why) or (None, ``no comparable run: ...``, naming what differs
    in the newest earlier COMPLETED run when there is one)."""
    patterns = tuple(ignore)
    fp = fingerprint(run, patterns)
    wanted = fingerprint_id(fp)
    rows = _indexed(root)
    if rows is None:
        rows = _scan(root, patterns)
    this_id, started = str(run.get("run_id") or ""), _number(run.get("started_epoch"))
    earlier = [
        r
        for r in _sorted(rows)
        if str(r.get("run_id")) != this_id
        and (started is None or _number(r.get("started_epoch")) is None or r["started_epoch"] <= started)
    ]
    if not earlier:
        return None, f"no comparable run: no earlier run under {root}"
    prints = [refine(_dict(r.get("fingerprint")), patterns) for r in earlier]
    same = [r for r, p in zip(earlier, prints) if fingerprint_id(p) == wanted]
    for row in same:
        path = os.path.join(root, str(row["dir"]))
        if row.get("status") == "COMPLETED" and os.path.isfile(os.path.join(path, REPORT_JSON)):
            when = _date(row["started_epoch"])
            return path, f"newest COMPLETED run with the same fingerprint {wanted}: {row['run_id']} ({when})"
    count = _plural(len(earlier), "earlier run")
    if same:
        why = f"{count}, {len(same)} with this fingerprint {wanted}, none COMPLETED with a report"
    else:
        why = f"{count}, none with this fingerprint {wanted}"
    other = next(
        ((r, p) for r, p in zip(earlier, prints) if r.get("status") == "COMPLETED" and fingerprint_id(p) != wanted),
        None,
    )
    if other is not None:
        why += f"; the newest COMPLETED one, {other[0]['run_id']}, differs in: " + "; ".join(differences(fp, other[1]))
    return None, f"no comparable run: {why}"


# ----------------------------------------------------------------------------------------------
# index.html

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td{white-space:nowrap}
td.w{white-space:normal;max-width:24em}
th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.COMPLETED,.PASS{color:#176f2c;font-weight:600}
.FAILED,.FAIL{color:#b3261e;font-weight:600}
.TIMEOUT{color:#a15c00;font-weight:600}
.small{font-size:12px;color:#555}
section{margin:1.5em 0}
svg{background:#fafafa;border:1px solid #ddd;margin-right:1em}
svg text{font-size:11px;fill:#333}
svg .axis{stroke:#888;fill:none}
svg .line{fill:none;stroke:#3a6ea5;stroke-width:1.2}
svg circle{fill:#3a6ea5}
svg circle.bad{fill:#b3261e}
""".strip()


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _href(link: str) -> str:
    return _e(urllib.parse.quote(link, safe="/"))


def _num(value: Any, unit: str = "") -> str:
    number = _number(value)
    if number is None:
        return ""
    size = abs(number)
    if size >= 1e9:
        text = f"{number / 1e9:,.2f} G"
    elif size >= 1e6:
        text = f"{number / 1e6:,.2f} M"
    else:
        text = f"{number:,.0f}" if size >= 1000 else f"{number:,.3g}" if size < 10 else f"{number:,.1f}"
    return f"{text}{unit}"


def _clip(text: Any) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "\u2026"


def _some(items: Sequence[Any]) -> str:
    """At most SHOWN items, escaped, the rest counted."""
    shown = "<br>".join(_e(_clip(i)) for i in items[:SHOWN])
    return shown + (f"<br><span class=small>and {len(items) - SHOWN} more</span>" if len(items) > SHOWN else "")


def _link(row: Mapping[str, Any]) -> str:
    """The run's best page: its report, else its run.json; '' when neither exists."""
    links = _dict(row.get("links"))
    return str(links.get("report") or links.get("run_json") or "")


def _row_html(row: Mapping[str, Any]) -> str:
    """One run's table row."""
    verdict = _dict(row.get("verdict"))
    links = _dict(row.get("links"))
    files = " ".join(f'<a href="{_href(str(links[k]))}">{label}</a>' for k, label in LINKS if links.get(k))
    throughput = _num(row.get("samples_per_second"), " samples/s")
    if row.get("tokens_per_second") is not None:
        throughput += f"<br><span class=small>{_e(_num(row.get('tokens_per_second'), ' tokens/s'))}</span>"
    slow = [f"node {n}" for n in row.get("slow_nodes") or ()] + [f"rank {r}" for r in row.get("straggler_ranks") or ()]
    status, word = _e(row.get("status")), _e(verdict.get("verdict"))
    reasons = _some(list(verdict.get("reasons") or ()))
    gpus = row.get("gpus_per_node")
    fp_id = _e(row.get("fingerprint_id"))
    cells = [
        _e(_date(row.get("started_epoch")).removesuffix(" UTC")),
        f'<a href="{_href(_link(row))}">{_e(row.get("run_id"))}</a>' if _link(row) else _e(row.get("run_id")),
        f'<span class="{status}">{status}</span>',
        (f'<span class="{word}">{word}</span>' if word else "")
        + (f"<br><span class=small>{reasons}</span>" if reasons else ""),
        f"{_e(row.get('nodes'))} &times; {_e(gpus if gpus is not None else '?')}",
        f"{_e(_clip(row.get('image')))}<br><span class=small>{_e(short_id(row.get('image_id')))}</span>",
        throughput,
        _e(_num(row.get("step_time_ms"), " ms")),
        _e(_num(row.get("iteration_time_ms"), " ms")),
        _some(slow),
        _some(list(row.get("drift_lines") or ())),
        f'<a href="#fp-{fp_id}">{fp_id}</a>',
        files,
    ]
    classes = ["", "", "", "w", "n", "w", "n", "n", "n", "w", "w", "", ""]
    return (
        "<tr>" + "".join(f"<td class={c}>{v}</td>" if c else f"<td>{v}</td>" for c, v in zip(classes, cells)) + "</tr>"
    )


LINKS = (("report", "report"), ("run_json", "run.json"), ("junit", "junit.xml"))
HEADERS = (
    "start (UTC)",
    "run",
    "status",
    "verdict",
    "nodes &times; GPUs",
    "image",
    "throughput",
    "step time",
    "CVS iteration (profiled window)",
    "slow nodes and ranks",
    "drift",
    "fingerprint",
    "files",
)


def _ticks(lo: float, hi: float) -> list[float]:
    return [lo, (lo + hi) / 2, hi]


def _trend_svg(points: Sequence[tuple[Mapping[str, Any], float]], label: str, unit: str) -> str:
    """An inline SVG of ``points`` (row, value), oldest first: the value (``label`` in ``unit``) of
    each run in start order, each point a link to the run's page with a tooltip."""
    width, height, left, right, top, bottom = 570, 190, 74, 12, 10, 44
    values = [v for _row, v in points]
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9 * max(abs(hi), 1.0):
        lo, hi = lo - max(abs(lo) * 0.05, 0.5), hi + max(abs(hi) * 0.05, 0.5)
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * (i + 0.5) / len(points))

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg width="{width}" height="{height}" role="img" aria-label="{_e(label)} ({_e(unit)})">',
        f'<path class=axis d="M{left} {top}V{top + plot_h}H{left + plot_w}"/>',
    ]
    for tick in _ticks(lo, hi):
        out.append(f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">{_e(_num(tick))}</text>')
    out.append(
        f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{_e(label)} ({_e(unit)})</text>"
    )
    first, last = _date(points[0][0].get("started_epoch")), _date(points[-1][0].get("started_epoch"))
    out.append(f'<text x="{left}" y="{top + plot_h + 14}">{_e(first)}</text>')
    if len(points) > 1:
        out.append(f'<text x="{left + plot_w}" y="{top + plot_h + 14}" text-anchor="end">{_e(last)}</text>')
    out.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">'
        f"runs in start order (UTC), {len(points)} plotted</text>"
    )
    if len(points) > 1:
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, (_row, v) in enumerate(points))
        out.append(f'<polyline class=line points="{path}"/>')
    for i, (row, value) in enumerate(points):
        tip = " \u00b7 ".join((str(row.get("run_id")), _date(row.get("started_epoch")), f"{_num(value)} {unit}"))
        tip += f" \u00b7 {row.get('status')}"
        bad = "" if row.get("status") == "COMPLETED" else " class=bad"
        circle = f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="3"{bad}><title>{_e(tip)}</title></circle>'
        link = _link(row)
        out.append(f'<a href="{_href(link)}">{circle}</a>' if link else circle)
    out.append("</svg>")
    return "".join(out)


def _fp_summary(fp: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """What a fingerprint is, in a line; its config as the newest run ``row`` was given it (the base
    config and overrides) where the fingerprint holds the effective config."""
    config = _dict(fp.get("config"))
    effective = config.get("effective")
    if isinstance(effective, Mapping):
        config = _dict(row.get("config"))
    overrides = [f"{k}={v}" for k, v in _dict(config.get("overrides")).items()]
    nodes = list(fp.get("nodes") or ())
    parts = [
        f"image {short_id(fp.get('image_id'))}",
        f"{len(nodes)} nodes ({_listed(nodes)})",
        f"{_text(fp.get('gpus_per_node'))} GPUs per node",
        f"ROCm {_text(fp.get('rocm'))}",
        f"amdgpu {_text(fp.get('amdgpu'))}",
        f"config {_text(config.get('base_config'))}"
        + (f" with {_listed(overrides, 8)}" if overrides else " without overrides")
        + (f" (effective config compared: {_plural(len(effective), 'key')})" if isinstance(effective, Mapping) else ""),
    ]
    text = " \u00b7 ".join(parts)
    return _e(text if len(text) <= 4 * MAX_TEXT else text[: 4 * MAX_TEXT - 1] + "\u2026")


def _group_html(fp_id: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """A fingerprint's section: what it is, and its runs' step time and throughput over time."""
    oldest_first = list(reversed(rows))
    steps = [(r, float(r["step_time_ms"])) for r in oldest_first if _number(r.get("step_time_ms")) is not None]
    tokens = any(_number(r.get("tokens_per_second")) is not None for r in rows)
    key, unit = ("tokens_per_second", "tokens/s") if tokens else ("samples_per_second", "samples/s")
    rate = [(r, float(r[key])) for r in oldest_first if _number(r.get(key)) is not None]
    out = [
        f'<section id="fp-{_e(fp_id)}"><h3>fingerprint {_e(fp_id)}: {_plural(len(rows), "run")}</h3>',
        f"<p class=small>{_fp_summary(_dict(rows[0].get('fingerprint')), rows[0])}</p>",
    ]
    out.append(_trend_svg(steps, "step time", "ms") if steps else "<p class=small>no step time measured</p>")
    out.append(_trend_svg(rate, "throughput", unit) if rate else "<p class=small>no throughput known</p>")
    out.append("</section>")
    return "".join(out)


def render_html(entries: list[dict[str, Any]]) -> str:
    """The history page: per fingerprint a trend of step time and throughput (inline SVG), then a
    table of ``entries`` (index rows), newest first; self-contained, no JavaScript, every value
    escaped."""
    rows = _sorted(entries)
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("fingerprint_id")), []).append(row)
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        "<title>Aorta runs</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Aorta runs</h1><p>{_plural(len(rows), 'run')}, newest first; "
        f"{_plural(len(groups), 'fingerprint')} (runs of one fingerprint are comparable: "
        "same nodes, image, GPUs per node, ROCm, amdgpu and effective config). Written "
        f"{_e(_date(time.time()))}.</p>",
        # The trends first: "is this cluster slower than last week, and since when?" is the question.
        "<h2>Trends per fingerprint, the newest first</h2>",
        *(_group_html(fp_id, members) for fp_id, members in groups.items()),
        "<h2>Runs</h2><table><thead><tr>",
        "".join(f"<th>{h}</th>" for h in HEADERS),
        "</tr></thead><tbody>",
        *(_row_html(r) for r in rows),
        "</tbody></table>",
        "</body></html>\n",
    ]
    return "\n".join(out)
