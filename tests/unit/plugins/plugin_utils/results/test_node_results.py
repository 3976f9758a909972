# SPDX-License-Identifier: GPL-3.0-or-later
"""What the nodes' steps returned, read once: the run's head, ranks per node and world size, the
nodes' summaries, clock offsets and collections; a failed step's result shortened for the console
and read back whole from its details file."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._node_summary import FORMAT
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _node_results as nr

REPO = Path(__file__).resolve().parents[5]


SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


STANDIN_CONFIG = REPO / "tests" / "standin" / "workload" / "config" / "standin.yaml"


# What preflight puts in a row; node_end's node_result holds the rest.
FROM_PREFLIGHT = ("fingerprint", "health")


def sample_vars():
    """The hostvars (``host_values``) and groups that made docs/samples/run.json: each node's
    preflight, launch and end results, and localhost's collection."""
    hostvars, names = {}, []
    launch = {
        "head": SAMPLE["nodes"][0]["name"],
        "nnodes": 2,
        "nproc": 2,
        "launch_mode": "torchrun",
        "master_addr": SAMPLE["master_addr"],
        "master_port": SAMPLE["master_port"],
        "excluded_nodes": [],
    }
    for row in SAMPLE["nodes"]:
        names.append(row["name"])
        derived = {"fabric_if": row["fabric_if"], "record": {"clock_offset_s": 0.25 * row["rank"]}}
        derived |= {key: row[key] for key in FROM_PREFLIGHT}
        prepared = {"derived": derived, "facts": {"image_id": SAMPLE["context"]["image_id"]}}
        if row["rank"] == 0:
            # The stand-in's base config as the head read it: the sample's effective_config is it.
            prepared["facts"]["read"] = {"text": STANDIN_CONFIG.read_text()}
        result = {key: value for key, value in row.items() if key not in FROM_PREFLIGHT}
        if row["rank"] == 0:  # the head's supervisor holds the cluster's sweep; run.json lifts it out
            cluster = {key: value for key, value in SAMPLE["fabric_sweep"].items() if key != "ran"}
            result["fabric_sweep"] = dict(row["fabric_sweep"], cluster=cluster)
        hostvars[row["name"]] = {
            "aorta_node_rank": row["rank"],
            "aorta_mgmt_ip": row["mgmt_ip"],
            "aorta_vpc_ip": row["vpc_ip"],
            "aorta_prepare": prepared,
            "aorta_launch": dict(launch, rank=row["rank"]),
            "aorta_end": {"node_result": result, "collect": {"rank": row["rank"], "name": row["name"]}},
        }
    collected = SAMPLE["combined_traces"]
    hostvars["localhost"] = {
        "aorta_combined": {
            "files": collected["files"],
            "missing_ranks": collected["missing_ranks"],
            "manifest": {"nodes_not_collected": collected["nodes_not_collected"]},
        }
    }
    return hostvars, {"aorta_nodes": names, "all": [*names, "localhost"]}


def test_the_head_is_the_launchs_else_the_first_node():
    hostvars = {"a": {"aorta_launch": {"head": "b"}}, "b": {"aorta_launch": {"nproc": 4, "nnodes": 1}}}
    groups = {"aorta_nodes": ["a", "b"]}
    assert nr.head(hostvars, groups) == "b"
    assert nr.head_launch(hostvars, groups) == {"nproc": 4, "nnodes": 1}
    assert nr.head({"a": {}}, groups) == "a"
    assert nr.head({"a": {"aorta_launch": {"failed": True}}}, groups) == "a"
    assert nr.head({}, {}) is None and nr.head_launch({}, None) == {}
    assert nr.nodes_of({"all": ["x"]}) == [] and nr.nodes_of({"aorta_nodes": ["n1", 2]}) == ["n1", "2"]


def test_nproc_is_the_launchs_else_the_configured_never_0_nor_omit():
    groups = {"aorta_nodes": ["a", "b"]}
    launched = {"a": {"aorta_launch": {"head": "a", "nproc": 4}}}
    assert nr.nproc(launched, groups, 2, 8) == 4
    # Node 0 excluded: its launch has the head but no nproc; the head's launch has it.
    excluded = {"a": {"aorta_launch": {"head": "b", "excluded": True}}, "b": {"aorta_launch": {"nproc": 2}}}
    assert nr.nproc(excluded, groups) == 2
    assert nr.nproc({}, groups, None, 8) == 8
    assert nr.nproc({}, groups, "6", 8) == 6
    omitted = "__omit_place_holder__0123456789abcdef"
    assert nr.nproc({"a": {"aorta_launch": {"nproc": omitted}}}, groups, 0, "8") == 8
    # No launch and nothing configured: None, said, not 0.
    assert nr.nproc({}, groups) is None
    assert nr.nproc({"a": {"aorta_launch": {"nproc": 0}}}, groups, None, None) is None
    assert nr.nproc({}, groups, True, None) is None


def test_expected_ranks_counts_the_nodes_that_ran_times_their_ranks():
    groups = {"aorta_nodes": ["a", "b", "c"]}
    launched = {"a": {"aorta_launch": {"head": "a", "nproc": 8, "nnodes": 2}}}
    assert nr.expected_ranks(launched, groups, None, 4) == 16
    assert nr.expected_ranks({}, groups, None, 4) == 12  # no launch: every node, the configured ranks
    assert nr.expected_ranks({}, groups, 2, 4) == 6
    assert nr.expected_ranks({}, groups) is None
    assert nr.expected_ranks({}, {}, None, 8) is None


def summary_at(path, summaries, decoder="msgspec"):
    """A node's summary file as its end fetched it (trace_summary's format); its path."""
    body = {"format": FORMAT, "figures": {"decoder": decoder, "analysis_s": 0.5}, "summaries": summaries, "files": []}
    with gzip.open(path, "wt") as handle:
        json.dump(body, handle)
    return str(path)


def test_summaries_and_clock_offsets_come_from_every_node_in_order(tmp_path):
    hostvars, groups = sample_vars()
    assert nr.summaries(hostvars, groups) is None  # no node made one: the traces are read
    second = summary_at(tmp_path / "n1.json.gz", [{"file": "r2.json", "rank": 2}], decoder="json")
    first = summary_at(tmp_path / "n0.json.gz", [{"file": "r0.json", "node": "stale"}, {"file": "r1.json"}])
    hostvars["192.168.144.2"]["aorta_end"]["summary"] = {"path": second}
    hostvars["192.168.128.2"]["aorta_end"]["summary"] = {"path": first}
    made = nr.summaries(hostvars, groups)
    assert made is not None
    found, rows = made[0], made[1]
    assert found == [
        {"file": "r0.json", "node": "192.168.128.2"},
        {"file": "r1.json", "node": "192.168.128.2"},
        {"file": "r2.json", "rank": 2, "node": "192.168.144.2"},
    ]
    assert [(row["node"], row["rank"], row["decoder"], row["analysis_s"]) for row in rows] == [
        ("192.168.128.2", 0, "msgspec", 0.5),
        ("192.168.144.2", 1, "json", 0.5),
    ]
    # A node whose summary failed on the way: an error naming it, its ranks then missing.
    hostvars["192.168.144.2"]["aorta_end"]["summary"] = {"error": "summary: pull failed: timed out"}
    made = nr.summaries(hostvars, groups)
    assert made is not None
    found, rows = made[0], made[1]
    assert found[-1]["error"] == "192.168.144.2: summary: pull failed: timed out" and len(rows) == 1
    assert nr.clock_offsets(hostvars, groups) == {"192.168.128.2": 0.0, "192.168.144.2": 0.25}
    hostvars["192.168.144.2"].pop("aorta_prepare")
    assert nr.clock_offsets(hostvars, groups) == {"192.168.128.2": 0.0}
    # A folder of traces given alone: no nodes.
    assert nr.summaries({}, {}) is None and nr.clock_offsets({}, {"all": ["localhost"]}) == {}
    # The collection's mode as the first node's end that has one resolved it.
    assert nr.collect_mode(hostvars, groups) == {}
    hostvars["192.168.144.2"]["aorta_end"]["collect_mode"] = {"mode": "sample", "why": "auto"}
    assert nr.collect_mode(hostvars, groups) == {"mode": "sample", "why": "auto"}


def test_combined_traces_takes_each_ended_nodes_collection():
    hostvars = {"a": {"aorta_end": {"collect": {"rank": 0}}}, "b": {"aorta_end": {"skipped": True}}, "c": {}}
    groups = {"aorta_nodes": ["a", "b", "c"]}
    assert nr.ended(hostvars, groups) == ["a", "b"]
    assert nr.collected_nodes(hostvars, groups) == [{"rank": 0}]
    assert nr.ended({}, groups) == [] and nr.collected_nodes({}, groups) == []


def test_host_values_reads_each_host_once_and_templates_what_it_reads():
    class Vars(dict):
        reads = 0

    class HostVars(dict):
        def __getitem__(self, host):
            Vars.reads += 1
            return super().__getitem__(host)

    hostvars = HostVars(a=Vars(aorta_launch={"head": "a"}, other=1), localhost=Vars(aorta_combined="{{ x }}"))
    found = nr.host_values(hostvars, ["a", "gone"], ["aorta_launch", "aorta_end"], template=lambda v: ("t", v))
    assert found == {"a": {"aorta_launch": ("t", {"head": "a"})}, "gone": {}}
    # The node once, and localhost once for the run's results directory (where a shortened failed
    # result's details file is named from).
    assert Vars.reads == 2
    assert nr.host_values(hostvars, ["localhost"], nr.LOCAL_VARS) == {"localhost": {"aorta_combined": "{{ x }}"}}


def test_a_failed_preflight_prints_under_300_characters_and_keeps_the_rest_in_its_details_file(
    failed_preflight, results_with_logs
):
    full = failed_preflight()
    assert len(nr.printed(full)) > 2500  # what the console printed of it
    results = results_with_logs
    short = nr.shorten_failure(copy.deepcopy(full), str(results), "gpu-node-07", "preflight", ("own", "reached"))
    path = results / "logs" / "gpu-node-07.preflight.json"
    line = nr.FATAL.format(node="gpu-node-07") + nr.printed(short)  # the console's whole line
    assert len(line) < 300, line
    # The internal keys for Ansible and no other: own and reached are true, their readers' default.
    assert set(short) == {"changed", "failed", "msg", "details", "_ansible_no_log"}
    # Named from the results directory the run printed at its start.
    assert (
        short["details"] == "logs/gpu-node-07.preflight.json" and short["failed"] is True and short["changed"] is False
    )
    assert short["msg"].endswith("\u2026") and "\n" not in short["msg"] and len(short["msg"]) <= nr.SHORT_MSG_MAX
    assert full["msg"].startswith(short["msg"][:-1])
    whole = json.loads(path.read_text())
    assert whole == {k: v for k, v in full.items() if k != "_ansible_no_log"}
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert nr.full_result(short, str(results)) == {**whole, "details": short["details"], "_ansible_no_log": False}
    # A node the head's failure kept from its probe: not reached, and that is kept.
    unreached = nr.shorten_failure(
        dict(full, reached=False), str(results), "gpu-node-07", "preflight", ("own", "reached")
    )
    assert unreached["reached"] is False and "own" not in unreached


def test_a_failure_stays_whole_where_it_is_short_or_has_nowhere_to_go(failed_preflight, tmp_path, results_with_logs):
    small = {"failed": True, "changed": False, "own": False, "reached": False, "msg": "not probed: the head failed"}
    results = results_with_logs
    assert nr.shorten_failure(small, str(results), "n1", "preflight") is small
    passed = dict(failed_preflight(), failed=False)
    assert nr.shorten_failure(passed, str(results), "n1", "preflight") is passed
    full = failed_preflight()
    # No logs/ (run_start makes it, never under --check), no results directory: whole, nothing written.
    assert nr.shorten_failure(full, str(tmp_path / "nowhere"), "n1", "preflight") is full
    assert nr.shorten_failure(full, None, "n1", "preflight") is full
    assert not (tmp_path / "nowhere").exists() and list((results / "logs").iterdir()) == []
    (results / "logs" / "n1.preflight.json").mkdir()  # a file it cannot write (a directory in its way)
    assert nr.shorten_failure(full, str(results), "n1", "preflight") is full
    assert nr.full_result(small) is small and nr.full_result(None) is None
    assert nr.full_result({"failed": True, "details": {"a": 1}}) == {"failed": True, "details": {"a": 1}}
    # Only a failed result was shortened: another's ``details`` names no file of ours.
    (results / "logs" / "n2.preflight.json").write_text('{"failures": ["x"]}')
    named = {"failed": False, "details": str(results / "logs" / "n2.preflight.json")}
    assert nr.full_result(named) is named and nr.full_result(dict(named, failed=True))["failures"] == ["x"]


def test_a_short_failure_keeps_what_its_readers_need_and_fits_a_long_path(failed_preflight):
    result = dict(failed_preflight(), own=False, reached=False, warnings=["w"], msg="first\nsecond " + "é" * 400)
    short = nr.short_failure(result, "/r/logs/n1.preflight.json", ("own", "reached", "absent"))
    assert "absent" not in short
    assert (short["own"], short["reached"], short["warnings"]) == (False, False, ["w"])
    assert short["msg"].startswith("first second \u00e9") and len(nr.printed(short)) < 300
    deep = "/" + "d" * 230 + "/logs/n1.preflight.json"
    short = nr.short_failure(result, deep, ("own",))
    assert len(short["msg"]) == nr.SHORT_MSG_MIN  # the msg keeps its least; the path is whole
    assert short["details"] == deep
    assert nr.details_file("/r", "a/b", "launch") == "/r/logs/a_b.launch.json"
