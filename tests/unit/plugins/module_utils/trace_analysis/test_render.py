# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html: "Why it stopped" comes first, from the diagnosis of a recorded stand-in hang, and is
absent when nothing went wrong; one word for one figure (step, CVS iteration) in the page, per_rank.csv
and the JSON; the stand-in said; unknown values in words; links to the files beside the page; what to
do next, with commands the collection has."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _render, _report, _stragglers
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._diagnosis import diagnose_run

DATA = Path(__file__).parents[2] / "plugin_utils" / "results" / "diagnosis_data"
STRAGGLERS = Path(__file__).parent / "straggler_data"


def test_why_it_stopped_comes_first_with_the_frame_of_the_rank_behind(tmp_path):
    nodes = json.loads((DATA / "hang" / "run.json").read_text())["nodes"]
    trouble = [{"at": 1.0, "kind": "xgmi", "line": "<xgmi> lost"}]
    nodes[0]["node_errors"] = {"source": "dmesg", "error": "", "lines": trouble}
    diagnosis = diagnose_run(str(DATA / "hang"), "TIMEOUT", nodes, 2)
    report = _report.build_report(str(tmp_path))  # no traces: a hang before the profiler exported
    report["diagnosis"] = diagnosis
    html = _render.render_html(report)
    why = html.index("<h2>Why it stopped</h2>")
    assert why < html.index("<h2 id='headline'>Headline</h2>")
    assert diagnosis["behind"][0]["frame"] in html and "gloo:broadcast #5" in html
    assert "&lt;xgmi&gt; lost" in html and "<xgmi>" not in html


def test_a_completed_run_without_trouble_has_no_why_section(tmp_path):
    report = _report.build_report(str(tmp_path))
    report["diagnosis"] = diagnose_run(str(tmp_path), "COMPLETED", [{"name": "n0"}], 1)
    assert "Why it stopped" not in _render.render_html(report)


def test_above_a_few_hundred_ranks_the_page_keeps_the_slowest_and_the_csv_has_every_rank(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    row = report["per_rank_summary"][0]
    report["per_rank_summary"] = [
        dict(row, rank=r, compute_per_iteration_ms=float(r), file=f"rank{r}.json") for r in range(300)
    ]
    report["unranked_traces"] = [dict(row, rank=None, file="single.json")]
    html = _render.render_html(report)
    table = html[html.index("id='per-rank'") :]
    assert "The 256 of 300 ranks that compute longest" in table
    assert "rank299.json" in table and "rank43.json" not in table and "rank44.json" in table
    assert "(no rank)" in table and "single.json" in table
    paths = _render.write_outputs(report, str(tmp_path / "out"))
    lines = (tmp_path / "out" / "per_rank.csv").read_text().splitlines()
    assert len(lines) == 1 + 300 + 1 and lines[-1].startswith(",")
    assert paths["csv"].endswith("per_rank.csv")


REPO = Path(__file__).resolve().parents[5]
SAMPLE_RUN = REPO / "docs" / "samples" / "run.json"


def _run_task(traces, report_dir, **extra):
    params = {name: spec.get("default") for name, spec in _report.TASK_ARGUMENT_SPEC.items()}
    params.update(traces_dir=str(traces), report_dir=str(report_dir), **extra)
    _result, failure = _report.run_task(params)
    assert failure == "", failure
    return json.loads((Path(report_dir) / "aorta_benchmark_report.json").read_text())


def _opening(report: dict) -> dict:
    return {row["id"]: row for row in _render.opening_rows(report)}


def test_step_and_cvs_iteration_are_two_words_for_two_figures_in_the_csv_the_json_and_the_page(tmp_path, combined_tree):
    """A step is one ProfilerStep#N (100 ms here); the CVS iteration is a rank's whole profiled window
    (4 steps: 400 ms). per_rank.csv's step column is step_time_ms; the JSON's iteration_time_ms is
    the same per-step value, a deprecated alias."""
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    paths = _render.write_outputs(report, str(tmp_path / "out"))
    rows = list(csv.DictReader(io.StringIO(Path(paths["csv"]).read_text())))
    assert [float(r["step_time_ms"]) for r in rows] == [100.0] * 4
    assert [float(r["total_time_us"]) for r in rows] == [400_000.0] * 4
    assert "iteration_time_ms" not in rows[0] and float(rows[0]["compute_per_step_ms"]) == 50.0
    written = json.loads(Path(paths["report"]).read_text())
    assert written["performance"]["avg_iteration_time_ms"] == 400.0  # CVS's key and meaning, kept
    for row in written["per_rank_summary"]:
        assert row["step_time_ms"] == row["iteration_time_ms"] == 100.0
    step_row = _opening(report)["step-time"]["text"]
    assert (
        step_row.startswith("100.000 ms per step") and "CVS iteration" in step_row and "4 steps): 400.000" in step_row
    )
    html = Path(paths["html"]).read_text()
    headline = html[html.index("id='headline'") : html.index("id='views'")]
    assert "<th>step (ms)</th>" in headline and "<th>CVS iteration: profiled window (ms)</th>" in headline
    assert "per iteration" not in html and "/iter" not in html


def test_a_row_with_only_the_older_key_still_fills_the_step_column(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50], bad_file=False)))
    for row in report["per_rank_summary"]:
        del row["step_time_ms"]  # a summary made before the rename
    _render.write_outputs(report, str(tmp_path / "out"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "per_rank.csv").read_text())))
    assert [float(r["step_time_ms"]) for r in rows] == [100.0, 100.0]


def test_the_stand_in_says_so_in_the_opening_rows_and_cpu_only_traces_too(tmp_path):
    record = json.loads(SAMPLE_RUN.read_text())  # a two-node stand-in run: its image and config
    (tmp_path / "run.json").write_text(json.dumps(record))
    traces = tmp_path / "combined_traces"
    shutil.copytree(STRAGGLERS / "ok1", traces)
    report = _run_task(traces, tmp_path)
    row = _opening(report)["workload"]
    assert row["text"].startswith(
        "the CPU stand-in for Aorta (gloo), not real GPU training; figures are not GPU performance"
    )
    assert "aorta-standin-workload:" in row["text"] and "config/standin.yaml" in row["text"] and row["css"] == "bad"
    html = (tmp_path / "report.html").read_text()
    assert html.index("id='workload'") < html.index("id='run-status'")
    # A real image and config: no stand-in, but the traces have no GPU event, and that is said.
    report["run"] = dict(report["run"], image="rocm/pytorch:latest", base_config="config/distributed.yaml")
    assert _opening(report)["workload"]["text"].startswith("CPU-only traces: no GPU event")
    assert _render.workload(report) == (_opening(report)["workload"]["text"], False)
    report["per_rank_summary"] = [dict(r, gpu=True) for r in report["per_rank_summary"]]
    assert "workload" not in _opening(report)


DASH = re.compile(r"(^|[\s(,;:])-($|[\s),;.])")  # a lone '-' standing for an unknown value


def test_an_unknown_value_is_said_in_words_never_a_dash_in_a_sentence(tmp_path, combined_tree):
    record = json.loads(SAMPLE_RUN.read_text())  # no sequence length: a stand-in config
    assert record["context"]["settings"]["sequence_length"] is None
    (tmp_path / "run.json").write_text(json.dumps(record))
    report = _run_task(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False), tmp_path)
    rows = _opening(report)
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
    texts = {row["id"]: row["strong"] + " " + row["text"] for row in _render.opening_rows(bare)}
    assert texts["run-time"].strip() == "not recorded" and texts["run-image"].strip() == "not recorded"
    assert texts["run-id"].strip() == "not recorded" and texts["run-status"].startswith("unknown")
    assert texts["run-head"].strip() == "not recorded"
    assert texts["step-time"].strip() == "not measured: no ProfilerStep#N in the traces"
    for key, text in [*texts.items(), *((r["id"], r["text"]) for r in _render.opening_rows(report))]:
        assert not DASH.search(text), (key, text)
    record["context"]["settings"]["sequence_length"] = 128
    record["context"]["overrides"] = {"training.max_steps": 6, "dataset.name": "x"}
    (tmp_path / "run.json").write_text(json.dumps(record))
    report = _run_task(tmp_path / "combined_traces", tmp_path)
    rows = _opening(report)
    assert "tokens/s = samples/s \u00d7 sequence length 128)" in rows["throughput"]["text"]
    assert rows["run-config"]["text"] == "config/standin.yaml; overrides: training.max_steps=6, dataset.name=x"


def test_the_page_links_each_file_beside_it_only_when_it_is_there(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path / "t", [50, 50], bad_file=False)))
    out = tmp_path / "folder"
    _render.write_outputs(report, str(out))  # a folder of traces: no run beside it
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
    _render.write_outputs(report, str(run_dir))
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
    _render.write_outputs(report, str(tmp_path / "elsewhere"))
    assert "junit.xml" not in (tmp_path / "elsewhere" / "report.html").read_text()
    # Without a folder (render_html alone) there is nothing to link.
    assert "id='files'" not in _render.render_html(report)


# What a command on the page may use: the collection's playbook and its documented variables.
COMMAND = re.compile(r"^ansible-playbook aorta\.cluster\.aorta_multinode( |$)")


def _commands_are_the_collections(items: list) -> None:
    documented = set(re.findall(r"^\| `(aorta_\w+)` \|", (REPO / "docs" / "variables.md").read_text(), re.M))
    assert (REPO / "playbooks" / "aorta_multinode.yml").is_file()
    for item in items:
        command = item["command"]
        if not command:
            continue
        assert COMMAND.match(command), command
        for name in re.findall(r"-e (aorta_\w+)=", command):
            assert name in documented, name
        for extra in re.findall(r"-e '(\{.*?\})'", command):
            assert set(json.loads(extra)) <= documented, extra


def test_what_next_gives_the_command_for_each_finding(tmp_path, combined_tree):
    # A healthy run: nothing to do.
    healthy = _report.build_report(str(combined_tree(tmp_path / "a", [50] * 12, bad_file=False)))
    healthy["straggler_test"] = dict(healthy["straggler_test"], steps=64, collectives=64)
    items = _render.what_next(healthy)
    assert [i["text"] for i in items] == ["Nothing to do: the run passed and no node or rank stands out."]
    # A straggler rank: where to look in timeline.json.
    slow_rank = _report.build_report(str(combined_tree(tmp_path / "b", [50, 50, 50, 50, 80, 50], bad_file=False)))
    (item,) = _render.what_next(slow_rank)
    assert item["text"].startswith("Straggler rank 4 on gpu-c (+60% compute per step)")
    assert "https://ui.perfetto.dev → Open trace file → timeline.json, process 'rank 4 · gpu-c'" in item["text"]
    # A slow node: run without it.
    slow_node = _report.build_report(str(combined_tree(tmp_path / "c", [50, 50, 80, 81, 50, 50], bad_file=False)))
    (item,) = _render.what_next(slow_node)
    assert item["text"].startswith("Slow node gpu-b (ranks 2-3, +")
    assert item["command"] == "ansible-playbook aorta.cluster.aorta_multinode -e aorta_cluster_file=<the copy> …"
    # A regression: the baseline it was compared with.
    regressed = dict(
        healthy,
        baseline={
            "verdict": "regression",
            "source": "/data/aorta_results/run-1/aorta_benchmark_report.json",
            "metrics": {"avg_step_time_ms": {"delta_ratio": 0.25}},
            "differences": ["image id: a vs b"],
        },
    )
    (item,) = _render.what_next(regressed)
    assert item["text"].startswith("Step time +25.0% against the baseline /data/aorta_results/run-1/")
    assert "they differ in: image id: a vs b" in item["text"]
    assert item["command"].endswith("-e aorta_baseline=/data/aorta_results/run-1/aorta_benchmark_report.json …")
    _commands_are_the_collections([*items, item])


def test_what_next_for_a_stopped_run_excluded_nodes_thresholds_and_too_few_steps(tmp_path, combined_tree):
    report = _report.build_report(
        str(combined_tree(tmp_path / "a", [50, 50, 50, 50], bad_file=False)),
        expected_results={"max_avg_iteration_ms": 150},
    )
    out = tmp_path / "run"
    out.mkdir()
    (out / "healthy.cluster.json").write_text("{}")
    report["run"] = {
        "record": str(out / "run.json"),
        "status": "TIMEOUT",
        "excluded": [{"name": "10.0.0.9", "reason": "ECC"}],
        "overrides": {"training.max_steps": 20},
    }
    report["verdict"] = {"verdict": "FAIL", "reasons": ["TIMEOUT"], "notes": []}
    items = _render.what_next(report, str(out))
    texts = [i["text"] for i in items]
    assert texts[0] == "The run ended TIMEOUT: read each node's log (logs/<node>.log)."
    assert texts[1].startswith("Preflight left out 1 node(s): 10.0.0.9")
    assert items[1]["command"] == (
        f"ansible-playbook aorta.cluster.aorta_multinode -e aorta_cluster_file={out}/healthy.cluster.json …"
    )
    # The threshold of CVS's iteration, told apart from a step.
    assert texts[2].startswith("Threshold(s) not met (max_avg_iteration_ms) and no node or rank stands out")
    assert "whole profiled window of 4 steps (400.000 ms), not one step (100.000 ms)" in texts[2]
    assert items[2]["command"].endswith("-e aorta_baseline=auto …")
    # 4 steps cannot name one of 2 nodes: profile more, the run's overrides kept.
    assert texts[3].startswith("4 profiled steps are too few to name a slow node or rank at 5% significance")
    assert (
        """-e '{"aorta_training_overrides": {"training.max_steps": 20, "profiling.active": 6}}' …"""
        in (items[3]["command"])
    )
    _commands_are_the_collections(items)
    # The stand-in: the command that runs Aorta itself.
    report["run"] = dict(report["run"], image="aorta-standin-workload:2bc4", status="COMPLETED", excluded=[])
    last = _render.what_next(report, str(out))[-1]
    assert last["text"].startswith("This was the stand-in: for GPU figures, run Aorta itself")
    assert "-e aorta_docker_image=<Aorta's image>" in last["command"]
    _commands_are_the_collections([last])
    html = _render.render_html(report, str(out))
    assert html.index("id='what-next'") < html.index("id='headline'")
    assert "<code>ansible-playbook aorta.cluster.aorta_multinode -i &lt;your inventory&gt;" in html


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
    assert "fabric-sweep" not in _opening(report)  # no sweep recorded: no row
    report["fabric_sweep"] = _sweep()
    row = _opening(report)["fabric-sweep"]
    assert (row["title"], row["css"]) == ("fabric sweep", "ok")
    assert (
        row["text"] == "no slow link: no node below 0.5x a median of 3.81 Gbit/s in every round (tcp, 3 rounds, 10 s)"
    )
    ids = list(_opening(report))
    assert ids[ids.index("finding") + 1] == "fabric-sweep"
    report["fabric_sweep"] = _sweep(unresolved_count=1, not_measured_count=2)
    row = _opening(report)["fabric-sweep"]
    assert row["css"] == "" and row["text"].endswith(
        "(tcp, 3 rounds, 10 s); 1 node(s) low in every round but not localised, 2 node(s) not measured"
        " (run.json's fabric_sweep)"
    )
    why = "2 node(s): every figure is of the same two ends, a slow one cannot be told from its peer"
    report["fabric_sweep"] = _sweep(localisable=False, reason=why, rounds=1, seconds=1.0)
    assert _opening(report)["fabric-sweep"]["text"] == (
        f"ran (tcp, 1 round, 1 s) against a median of 3.81 Gbit/s but cannot name a slow node: {why}"
    )
    report["fabric_sweep"] = {"ran": False, "why": "no node swept: aorta_fabric_sweep off, or no node reached the go"}
    row = _opening(report)["fabric-sweep"]
    assert (row["text"], row["css"]) == (
        "not run: no node swept: aorta_fabric_sweep off, or no node reached the go",
        "",
    )
    assert not [r for r in _opening(report) if r.startswith("slow-link")]


def test_slow_links_are_rows_before_any_chart_and_their_number_not_the_ranks_sets_how_many(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50, 50, 50, 50], bad_file=False)))
    report["fabric_sweep"] = _sweep(slow_count=1)
    report["slow_links"] = [_link("10.0.0.3", 1)]
    small = _render.opening_rows(report)
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
    (row,) = [r for r in _render.opening_rows(report) if r["id"] == "slow-link-1"]
    assert row["text"] == "10.0.0.3: fabric 0.4 Gbit/s received against a median of 3.8 Gbit/s (0.05x)"
    # 1024 ranks on 128 nodes, 20 of them slow: 8 rows and one "and 12 more", nothing per rank.
    first = report["per_rank_summary"][0]
    report["per_rank_summary"] = [dict(first, rank=r, node=f"10.0.{r // 8 // 256}.{r // 8 % 256}") for r in range(1024)]
    report["slow_links"] = [_link(f"10.0.0.{n}", n) for n in range(20)]
    big = _render.opening_rows(report)
    links = [r for r in big if r["id"].startswith("slow-link")]
    assert [r["id"] for r in links] == [*(f"slow-link-{i}" for i in range(1, 9)), "slow-link-more"]
    assert links[-1]["text"] == "and 12 more (the report JSON's slow_links)"
    assert len(big) == len(small) + 8
    html = _render.render_html(report)
    assert html.index("id='slow-link-more'") < html.index("<svg")
    assert html.count("<tr id='slow-link-") == 9


def test_the_collectives_table_gives_each_busbw_against_the_fabric_blank_without_a_sweep(tmp_path, fixtures_dir):
    (tmp_path / "t").mkdir()
    shutil.copy(fixtures_dir / "traces" / "nccl" / "nccl-data.json.gz", tmp_path / "t" / "trace.json.gz")
    report = _report.build_report(str(tmp_path / "t"), include_unlinked_kernels=True)
    table = _render.page_model(report)["collectives"]
    assert table["head"][-2:] == ["busbw (GB/s)", "of fabric"]
    assert {row[-1] for row in table["rows"]} == {""}
    assert "of fabric is\nblank: no fabric sweep measured the links" in _render.render_html(report)
    report["fabric_sweep"] = _sweep(median_gbps=25.0)
    table = _render.page_model(report)["collectives"]
    for row, c in zip(table["rows"], report["collective_table"]):
        assert row[-1] == _stragglers.times(c["busbw_gbps"] * 8 / 25.0)
    assert table["rows"][0][-2:] == ["2.080", "0.67x"]  # the 7.8 MiB all-reduce: 2.08 GB/s = 16.6 Gbit/s
    report["fabric_sweep"] = {"ran": False, "why": "off"}
    assert {row[-1] for row in _render.page_model(report)["collectives"]["rows"]} == {""}


def test_what_next_for_a_slow_link_says_where_to_look_and_how_to_keep_such_a_node_out(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50] * 12, bad_file=False)))
    report["straggler_test"] = dict(report["straggler_test"], steps=64, collectives=64)
    report["slow_links"] = [_link("10.0.0.3", 1)]
    (item,) = _render.what_next(report)
    assert item["text"].startswith("Slow fabric link on 10.0.0.3 (the sweep before the ranks started)")
    assert "nodes[].link" in item["text"]
    assert (
        item["command"]
        == "ansible-playbook aorta.cluster.aorta_multinode -i <your inventory> -e aorta_fabric_min_gbps=<Gbit/s> …"
    )
    _commands_are_the_collections([item])


def test_the_opening_says_how_the_nodes_analysed_their_traces_and_warns_once_without_msgspec():
    slow = {"node": "gpu-c", "rank": 2, "decoder": "json", "analysis_s": 41.3, "files": 8, "bytes": 8}
    slow["peak_rss_mb"] = None
    fast = dict(slow, node="gpu-a", rank=0, decoder="msgspec", analysis_s=0.5)
    analysed = _report.node_analysis([fast, slow, dict(fast, node="gpu-b", rank=1, analysis_s=6.0)])
    report = _report.build_report("/nowhere", summaries=[], node_analysis_rows=[fast, slow])
    rows = _opening(dict(report, node_analysis=analysed))
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
    html = _render.render_html(report)
    assert html.count("(no msgspec)") == 1 and "Warning: 1 node analysed" not in html
    # Every node with msgspec: the line alone; a report from full traces, or an earlier version's: neither.
    rows = _opening(dict(report, node_analysis=_report.node_analysis([fast])))
    assert rows["node-analysis"]["text"].startswith("analysed on the nodes: 1 node in 0.50 s median")
    assert "node-analysis-json" not in rows
    for earlier in (dict(report, node_analysis=None), {k: v for k, v in report.items() if k != "node_analysis"}):
        assert not {i for i in _opening(earlier) if i.startswith("node-analysis")}


def test_the_opening_says_how_a_sampled_run_was_collected_and_what_follows_the_report():
    report = _report.build_report("/nowhere", summaries=[])
    sampled = {"mode": "sample", "why": "auto: 40 nodes, more than aorta_collect_all_max_nodes (16)", "seed": 4242}
    rows = _opening(dict(report, collection=dict(sampled, sample_nodes=2, budget_gb=50.0)))
    assert rows["collection"]["text"] == (
        "aorta_collect_traces sample (auto: 40 nodes, more than aorta_collect_all_max_nodes (16)): after this "
        "report, the traces of the nodes it names, the next node after each and 2 more drawn at random "
        "(seed 4242) come to combined_traces, within 50.0 GB; the others stay on their nodes, listed with their "
        "sha256 in combined_traces/manifest.json (on_node), and playbooks/trace_collect.yml pulls any of them"
    )
    rows = _opening(dict(report, collection={"mode": "none", "why": "aorta_collect_traces false"}))
    assert rows["collection"]["text"].startswith("aorta_collect_traces none (aorta_collect_traces false): no trace")
    # A run collected whole, or an earlier version's report: no row.
    for whole in (dict(report, collection={"mode": "all"}), dict(report, collection=None), report):
        assert "collection" not in _opening(whole)
