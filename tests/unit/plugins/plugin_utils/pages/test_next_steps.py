# SPDX-License-Identifier: GPL-3.0-or-later
"""What to do next: a command the collection has for each finding."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _next_steps, _report_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _report

REPO = Path(__file__).resolve().parents[5]


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
    items = _next_steps.what_next(healthy)
    assert [i["text"] for i in items] == ["Nothing to do: the run passed and no node or rank stands out."]
    # A straggler rank: where to look in timeline.json.
    slow_rank = _report.build_report(str(combined_tree(tmp_path / "b", [50, 50, 50, 50, 80, 50], bad_file=False)))
    (item,) = _next_steps.what_next(slow_rank)
    assert item["text"].startswith("Straggler rank 4 on gpu-c (+60% compute per step)")
    assert "https://ui.perfetto.dev → Open trace file → timeline.json, process 'rank 4 · gpu-c'" in item["text"]
    # A slow node: run without it.
    slow_node = _report.build_report(str(combined_tree(tmp_path / "c", [50, 50, 80, 81, 50, 50], bad_file=False)))
    (item,) = _next_steps.what_next(slow_node)
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
    (item,) = _next_steps.what_next(regressed)
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
    items = _next_steps.what_next(report, str(out))
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
    last = _next_steps.what_next(report, str(out))[-1]
    assert last["text"].startswith("This was the stand-in: for GPU figures, run Aorta itself")
    assert "-e aorta_docker_image=<Aorta's image>" in last["command"]
    _commands_are_the_collections([last])
    html = _report_page.render_html(report, str(out))
    assert html.index("id='what-next'") < html.index("id='headline'")
    assert "<code>ansible-playbook aorta.cluster.aorta_multinode -i &lt;your inventory&gt;" in html


def _link(node: str, node_rank: int, **extra) -> dict:
    link = {"node": node, "node_rank": node_rank, "direction": "send", "send_gbps": 0.19, "recv_gbps": 3.7}
    link |= {"median_gbps": 3.8, "ratio": 0.05, "collective_ratio": 1.4, "busbw_ratio": 0.3, "busbw_op": "allreduce"}
    return link | extra


def test_what_next_for_a_slow_link_says_where_to_look_and_how_to_keep_such_a_node_out(tmp_path, combined_tree):
    report = _report.build_report(str(combined_tree(tmp_path, [50] * 12, bad_file=False)))
    report["straggler_test"] = dict(report["straggler_test"], steps=64, collectives=64)
    report["slow_links"] = [_link("10.0.0.3", 1)]
    (item,) = _next_steps.what_next(report)
    assert item["text"].startswith("Slow fabric link on 10.0.0.3 (the sweep before the ranks started)")
    assert "nodes[].link" in item["text"]
    assert (
        item["command"]
        == "ansible-playbook aorta.cluster.aorta_multinode -i <your inventory> -e aorta_fabric_min_gbps=<Gbit/s> …"
    )
    _commands_are_the_collections([item])
