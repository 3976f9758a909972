# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html's opening rows: the stand-in said, unknown values in words, the files beside the page, the
fabric sweep and its slow links before any chart, how the nodes analysed and collected."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _opening, _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report, _task

STRAGGLERS = Path(__file__).parents[2] / "module_utils" / "trace_analysis" / "straggler_data"


REPO = Path(__file__).resolve().parents[5]


SAMPLE_RUN = REPO / "docs" / "samples" / "run.json"


def _run_task(traces, report_dir, **extra):
    params = {name: spec.get("default") for name, spec in _task.TASK_ARGUMENT_SPEC.items()}
    params.update(traces_dir=str(traces), report_dir=str(report_dir), **extra)
    _result, failure = _task.run_task(params)
    assert failure == "", failure
    return json.loads((Path(report_dir) / "aorta_benchmark_report.json").read_text())


def _opening_of(report: dict) -> dict:
    return {row["id"]: row for row in _opening.opening_rows(report)}


def test_the_stand_in_says_so_in_the_opening_rows_and_cpu_only_traces_too(tmp_path):
    record = json.loads(SAMPLE_RUN.read_text())  # a two-node stand-in run: its image and config
    (tmp_path / "run.json").write_text(json.dumps(record))
    traces = tmp_path / "combined_traces"
    shutil.copytree(STRAGGLERS / "ok1", traces)
    report = _run_task(traces, tmp_path)
    row = _opening_of(report)["workload"]
    assert row["text"].startswith(
        "the CPU stand-in for Aorta (gloo), not real GPU training; figures are not GPU performance"
    )
    assert "aorta-standin-workload:" in row["text"] and "config/standin.yaml" in row["text"] and row["css"] == "bad"
    html = (tmp_path / "report.html").read_text()
    assert html.index("id='workload'") < html.index("id='run-status'")
    # A real image and config: no stand-in, but the traces have no GPU event, and that is said.
    report["run"] = dict(report["run"], image="rocm/pytorch:latest", base_config="config/distributed.yaml")
    assert _opening_of(report)["workload"]["text"].startswith("CPU-only traces: no GPU event")
    assert _opening.workload(report) == (_opening_of(report)["workload"]["text"], False)
    report["per_rank_summary"] = [dict(r, gpu=True) for r in report["per_rank_summary"]]
    assert "workload" not in _opening_of(report)


DASH = re.compile(r"(^|[\s(,;:])-($|[\s),;.])")  # a lone '-' standing for an unknown value


def test_an_unknown_value_is_said_in_words_never_a_dash_in_a_sentence(tmp_path, combined_tree):
    record = json.loads(SAMPLE_RUN.read_text())  # no sequence length: a stand-in config
    assert record["context"]["settings"]["sequence_length"] is None
    (tmp_path / "run.json").write_text(json.dumps(record))
    report = _run_task(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False), tmp_path)
    rows = _opening_of(report)
    throughput = rows["throughput"]["text"]
    assert "sequence length -" not in throughput and "tokens/s" not in throughput.split("(")[0]
    assert throughput.endswith("; no tokens/s: the config has no dataset.sequence_length)")
    assert rows["run-config"]["text"] == "config/standin.yaml, no overrides"
    # Who led the run: run.json's head, with the rendezvous on its fabric.
    assert (
        rows["run-head"]["text"] == f"{record['head']}, rendezvous at {record['master_addr']}:{record['master_port']}"
    )
    # Every value missing from the run record.
    bare = dict(report, run={"record": "run.json", "status": None}, performance=dict(report["performance"]))
    bare["performance"].update(avg_step_time_ms=None, std_step_time_us=None, avg_iteration_time_ms=None)
    texts = {row["id"]: row["strong"] + " " + row["text"] for row in _opening.opening_rows(bare)}
    assert texts["run-time"].strip() == "not recorded" and texts["run-image"].strip() == "not recorded"
    assert texts["run-id"].strip() == "not recorded" and texts["run-status"].startswith("unknown")
    assert texts["run-head"].strip() == "not recorded"
    assert texts["step-time"].strip() == "not measured: no ProfilerStep#N in the traces"
    for key, text in [*texts.items(), *((r["id"], r["text"]) for r in _opening.opening_rows(report))]:
        assert not DASH.search(text), (key, text)
    record["context"]["settings"]["sequence_length"] = 128
    record["context"]["overrides"] = {"training.max_steps": 6, "dataset.name": "x"}
    (tmp_path / "run.json").write_text(json.dumps(record))
    report = _run_task(tmp_path / "combined_traces", tmp_path)
    rows = _opening_of(report)
    assert "tokens/s = samples/s \u00d7 sequence length 128)" in rows["throughput"]["text"]
    assert rows["run-config"]["text"] == "config/standin.yaml; overrides: training.max_steps=6, dataset.name=x"


def test_the_page_links_each_file_beside_it_only_when_it_is_there(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path / "t", [50, 50], bad_file=False)))
    out = tmp_path / "folder"
    _outputs.write_outputs(report, str(out))  # a folder of traces: no run beside it
    html = (out / "report.html").read_text()
    links = re.findall(r"<a href='([^']*)'>", html)
    assert links == ["aorta_benchmark_report.json", "per_rank.csv", "timeline.json", "https://ui.perfetto.dev"]
    assert "Open trace file → timeline.json" in html
    # A run's results directory: run.json and logs/ beside the page; junit.xml is written after it,
    # by the run's last task, and is linked for it.
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "10.0.0.1.log").write_text("")
    (run_dir / "run.json").write_text("{}")
    report["run"] = {"record": str(run_dir / "run.json"), "status": "COMPLETED"}
    _outputs.write_outputs(report, str(run_dir))
    html = (run_dir / "report.html").read_text()
    links = [href for href in re.findall(r"<a href='([^']*)'>", html) if not href.startswith("https:")]
    assert links == [
        "run.json",
        "aorta_benchmark_report.json",
        "per_rank.csv",
        "timeline.json",
        "junit.xml",
        "logs/",
    ]
    assert "(written by the run&#39;s last task, after this page)" in html and "(1 log)" in html
    for href in links:
        assert (run_dir / href).exists() or href == "junit.xml"
    # The same report written elsewhere (not the run's directory) links no junit.xml it has not got.
    _outputs.write_outputs(report, str(tmp_path / "elsewhere"))
    assert "junit.xml" not in (tmp_path / "elsewhere" / "report.html").read_text()
    # Without a folder (render_html alone) there is nothing to link.
    assert "id='files'" not in _report_page.render_html(report)


def _sweep(**extra) -> dict:
    """The report's ``fabric_sweep`` of a sweep that ran on 3 nodes and named nobody."""
    found = {"ran": True, "tool": "tcp", "seconds": 10.0, "threshold": 0.5, "min_gbps": None, "median_gbps": 3.812}
    found |= {"localisable": True, "reason": None, "rounds": 3, "slow_count": 0}
    return found | {"unresolved_count": 0, "not_measured_count": 0} | extra


def _link(node: str, node_rank: int, **extra) -> dict:
    link = {"node": node, "node_rank": node_rank, "direction": "send", "send_gbps": 0.19, "recv_gbps": 3.7}
    link |= {"median_gbps": 3.8, "ratio": 0.05, "collective_ratio": 1.4, "busbw_ratio": 0.3, "busbw_op": "allreduce"}
    return link | extra


def test_the_fabric_sweep_row_says_it_found_nothing_could_not_localise_or_did_not_run(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    assert "fabric-sweep" not in _opening_of(report)  # no sweep recorded: no row
    report["fabric_sweep"] = _sweep()
    row = _opening_of(report)["fabric-sweep"]
    assert (row["title"], row["css"]) == ("fabric sweep", "ok")
    assert (
        row["text"] == "no slow link: no node below 0.5x a median of 3.81 Gbit/s in every round (tcp, 3 rounds, 10 s)"
    )
    ids = list(_opening_of(report))
    assert ids[ids.index("finding") + 1] == "fabric-sweep"
    report["fabric_sweep"] = _sweep(unresolved_count=1, not_measured_count=2)
    row = _opening_of(report)["fabric-sweep"]
    assert row["css"] == "" and row["text"].endswith(
        "(tcp, 3 rounds, 10 s); 1 node(s) low in every round but not localised, 2 node(s) not measured"
        " (run.json's fabric_sweep)"
    )
    why = "2 node(s): every figure is of the same two ends, a slow one cannot be told from its peer"
    report["fabric_sweep"] = _sweep(localisable=False, reason=why, rounds=1, seconds=1.0)
    assert _opening_of(report)["fabric-sweep"]["text"] == (
        f"ran (tcp, 1 round, 1 s) against a median of 3.81 Gbit/s but cannot name a slow node: {why}"
    )
    report["fabric_sweep"] = {"ran": False, "why": "no node swept: aorta_fabric_sweep off, or no node reached the go"}
    row = _opening_of(report)["fabric-sweep"]
    assert (row["text"], row["css"]) == (
        "not run: no node swept: aorta_fabric_sweep off, or no node reached the go",
        "",
    )
    assert not [r for r in _opening_of(report) if r.startswith("slow-link")]


def test_slow_links_are_rows_before_any_chart_and_their_number_not_the_ranks_sets_how_many(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    report["fabric_sweep"] = _sweep(slow_count=1)
    report["slow_links"] = [_link("10.0.0.3", 1)]
    small = _opening.opening_rows(report)
    (row,) = [r for r in small if r["id"].startswith("slow-link")]
    assert (row["id"], row["title"], row["css"]) == ("slow-link-1", "slow link", "bad")
    assert row["text"] == (
        "10.0.0.3: fabric 0.19 Gbit/s sent against a median of 3.8 Gbit/s (0.05x); collectives 1.4x the median "
        "node; allreduce busbw 0.3x the fabric"
    )
    assert "fabric-sweep" not in {r["id"] for r in small}  # the slow link says it all
    # What is not known is left out.
    report["slow_links"] = [
        _link("10.0.0.3", 1, direction="recv", recv_gbps=0.4, collective_ratio=None, busbw_ratio=None)
    ]
    (row,) = [r for r in _opening.opening_rows(report) if r["id"] == "slow-link-1"]
    assert row["text"] == "10.0.0.3: fabric 0.4 Gbit/s received against a median of 3.8 Gbit/s (0.05x)"
    # 1024 ranks on 128 nodes, 20 of them slow: 8 rows and one "and 12 more", nothing per rank.
    first = report["per_rank_summary"][0]
    report["per_rank_summary"] = [dict(first, rank=r, node=f"10.0.{r // 8 // 256}.{r // 8 % 256}") for r in range(1024)]
    report["slow_links"] = [_link(f"10.0.0.{n}", n) for n in range(20)]
    big = _opening.opening_rows(report)
    links = [r for r in big if r["id"].startswith("slow-link")]
    assert [r["id"] for r in links] == [*(f"slow-link-{i}" for i in range(1, 9)), "slow-link-more"]
    assert links[-1]["text"] == "and 12 more (the report JSON's slow_links)"
    assert len(big) == len(small) + 8
    html = _report_page.render_html(report)
    assert html.index("id='slow-link-more'") < html.index("<svg")
    assert html.count("<tr id='slow-link-") == 9


def test_the_opening_says_how_the_nodes_analysed_their_traces_and_warns_once_without_msgspec():
    slow = {"node": "gpu-c", "rank": 2, "decoder": "json", "analysis_s": 41.3, "files": 8, "bytes": 8}
    slow["peak_rss_mb"] = None
    fast = dict(slow, node="gpu-a", rank=0, decoder="msgspec", analysis_s=0.5)
    analysed = _report.node_analysis([fast, slow, dict(fast, node="gpu-b", rank=1, analysis_s=6.0)])
    report = _report.build_report("/nowhere", summaries=[], node_analysis_rows=[fast, slow])
    rows = _opening_of(dict(report, node_analysis=analysed))
    assert rows["node-analysis"]["text"] == (
        "analysed on the nodes: 3 nodes in 6.0 s median, 41.3 s at most "
        "(slowest: gpu-c (41.3 s), gpu-b (6.0 s), gpu-a (0.50 s))"
    )
    assert rows["node-analysis-json"]["css"] == "bad"
    assert (
        rows["node-analysis-json"]["text"]
        == report["warnings"][0]
        == (
            "1 node analysed with the standard library's JSON decoder (no msgspec): gpu-c: "
            "slower, and more memory per file (docs/scale.md)"
        )
    )
    html = _report_page.render_html(report)
    assert html.count("(no msgspec)") == 1 and "Warning: 1 node analysed" not in html
    # Every node with msgspec: the line alone; a report from full traces, or an earlier version's: neither.
    rows = _opening_of(dict(report, node_analysis=_report.node_analysis([fast])))
    assert rows["node-analysis"]["text"].startswith("analysed on the nodes: 1 node in 0.50 s median")
    assert "node-analysis-json" not in rows
    for earlier in (dict(report, node_analysis=None), {k: v for k, v in report.items() if k != "node_analysis"}):
        assert not {i for i in _opening_of(earlier) if i.startswith("node-analysis")}


def test_the_opening_says_how_a_sampled_run_was_collected_and_what_follows_the_report():
    report = _report.build_report("/nowhere", summaries=[])
    sampled = {"mode": "sample", "why": "auto: 40 nodes, more than aorta_collect_all_max_nodes (16)", "seed": 4242}
    rows = _opening_of(dict(report, collection=dict(sampled, sample_nodes=2, budget_gb=50.0)))
    assert rows["collection"]["text"] == (
        "aorta_collect_traces sample (auto: 40 nodes, more than aorta_collect_all_max_nodes (16)): after this "
        "report, the traces of the nodes it names, the next node after each and 2 more drawn at random "
        "(seed 4242) come to combined_traces, within 50.0 GB; the others stay on their nodes, listed with their "
        "sha256 in combined_traces/manifest.json (on_node), and playbooks/trace_collect.yml pulls any of them"
    )
    rows = _opening_of(dict(report, collection={"mode": "none", "why": "aorta_collect_traces false"}))
    assert rows["collection"]["text"].startswith("aorta_collect_traces none (aorta_collect_traces false): no trace")
    # A run collected whole, or an earlier version's report: no row.
    for whole in (dict(report, collection={"mode": "all"}), dict(report, collection=None), report):
        assert "collection" not in _opening_of(whole)
