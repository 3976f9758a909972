# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html, the history's index.html and a campaign's scaling.html as a person opens them:
headless Chromium (Debian's package, installed by tools/install-host-deps.sh) loads each page with a
window.onerror hook (the report for 4 and for 1024 ranks), and keeps a screenshot of each as a test
artifact under tests/output/browser/."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.campaign import _rungs
from ansible_collections.aorta.cluster.plugins.plugin_utils.pages import _scaling_page
from ansible_collections.aorta.cluster.plugins.plugin_utils.report import _outputs, _report
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history

# Headless Chromium's start and render on the two cores: no other worker's runs beside it.
pytestmark = pytest.mark.whole_machine

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "output" / "browser"
HOOK = (
    "<script>window.onerror=function(m){document.documentElement.setAttribute('data-js-error',String(m))};"
    "window.addEventListener('load',function(){document.documentElement.setAttribute('data-loaded','1')});</script>"
)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is not installed: run tools/install-host-deps.sh"
    return found


# Measured by the browser itself: every SVG text's box against its SVG's. A tick label drawn past the
# SVG's edge is cut there (the first real run's ".7.8 ms"); the count and the first such text are
# left on the root element for the test to read.
MEASURE = (
    "<script>window.addEventListener('load',function(){var cut=[],n=0;"
    "document.querySelectorAll('svg').forEach(function(svg){var box=svg.getBoundingClientRect();"
    "svg.querySelectorAll('text').forEach(function(t){var r=t.getBoundingClientRect();n++;"
    "if(r.left<box.left-0.5||r.right>box.right+0.5||r.top<box.top-0.5||r.bottom>box.bottom+0.5)"
    "cut.push(t.textContent)})});var root=document.documentElement;"
    "root.setAttribute('data-texts',String(n));root.setAttribute('data-clipped',String(cut.length));"
    "root.setAttribute('data-clipped-first',cut.length?cut[0]:'')});</script>"
)


# Measured by the browser: the widest table's right edge against the window's width.
WIDTH = (
    "<script>window.addEventListener('load',function(){var right=0;"
    "document.querySelectorAll('table').forEach(function(t){right=Math.max(right,t.getBoundingClientRect().right)});"
    "var root=document.documentElement;root.setAttribute('data-table-right',String(Math.ceil(right)));"
    "root.setAttribute('data-window',String(window.innerWidth))});</script>"
)


def open_in_browser(page: Path, shot: Path, script: str = "", width: int = 1300) -> str:
    """The DOM after load, and a screenshot; fails the test on a JavaScript error. ``script`` is
    added to the page's head too (the measure of its SVG texts, or of its tables' width)."""
    hooked = page.with_name("hooked-" + page.name)
    html = page.read_text()
    hooked.write_text(html.replace("<head>", "<head>" + HOOK + script, 1))
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    base.append(f"--window-size={width},2000")
    dom = subprocess.run(
        [*base, "--virtual-time-budget=5000", "--dump-dom", hooked.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    assert 'data-js-error="' not in dom, dom[:2000]  # the attribute, not the hook's own text
    assert 'data-loaded="1"' in dom
    return dom


@pytest.mark.parametrize("nodes,per_node", [(2, 2), (128, 8)])
def test_the_report_opens_in_chromium_without_error_at_4_and_1024_ranks(tmp_path, combined_tree, nodes, per_node):
    rng = random.Random(nodes)
    world = nodes * per_node
    slow = nodes // 2
    compute = [50 * (1.3 if r // per_node == slow else 1.0) * rng.gauss(1, 0.02) for r in range(world)]
    root = combined_tree(tmp_path, compute, ranks_per_node=per_node, bad_file=False)
    report = _report.build_report(str(root))
    paths = _outputs.write_outputs(report, str(tmp_path / "out"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"report-{world}-ranks.png"
    dom = open_in_browser(Path(paths["html"]), shot, MEASURE)
    assert shot.stat().st_size > 10_000  # a page was drawn
    assert 'id="opening"' in dom and 'id="views"' in dom
    assert Path(paths["html"]).stat().st_size < 10_000_000
    # No SVG text is cut at its SVG's edge, as Chromium lays them out.
    texts = int(re.search(r'data-texts="(\d+)"', dom).group(1))
    clipped = re.search(r'data-clipped="(\d+)" data-clipped-first="([^"]*)"', dom)
    assert texts > 10 and clipped and clipped.group(1) == "0", clipped and clipped.groups()
    # Every chart's axes are titled with their quantity and unit.
    for title in ("local rank (GPU) →", ">ranks<", "compute per step (ms)", "exposed communication per step (ms)"):
        assert title in dom, title
    if world <= 64:
        assert ">ms per step<" in dom and ">rank<" in dom  # the per-rank bars
    # The files beside the page are linked (only those there: a folder of traces has no run.json),
    # and the page says what to do next before its first chart.
    links = re.findall(r'<a href="([^"]*)">', dom)
    assert links == ["aorta_benchmark_report.json", "per_rank.csv", "timeline.json", "https://ui.perfetto.dev"]
    assert all((Path(paths["html"]).parent / href).is_file() for href in links[:-1])
    assert dom.index('id="what-next"') < dom.index('id="views"')
    if nodes > 2:
        # The slow node is named before any chart, and is a row of the heat map.
        named = report["slow_nodes"][0]["node"]
        assert dom.index(named) < dom.index('id="headline"')


def test_the_hook_does_catch_a_javascript_error(tmp_path):
    """Without this, a page whose script fails would pass the test above unnoticed."""
    page = tmp_path / "broken.html"
    page.write_text("<!doctype html><html><head></head><body><script>noSuchFunction()</script></body></html>")
    with pytest.raises(AssertionError, match="data-js-error"):
        open_in_browser(page, tmp_path / "broken.png")


def test_the_history_page_opens_in_chromium_without_error(tmp_path):
    """index.html of a results root of 200 runs (three fingerprints, a failed run among them), kept
    as a screenshot beside the report's."""
    sample = json.loads((REPO / "docs" / "samples" / "run.json").read_text())
    rng = random.Random(7)
    for index in range(200):
        folder = tmp_path / f"run-{index:03d}"
        folder.mkdir()
        # Three images, with ids that differ where docker's short id shows them (the first 12 digits).
        context = dict(sample["context"], image_id="sha256:" + hashlib.sha256(bytes([index % 3])).hexdigest())
        # What a real cluster's rows hold: a long image name, a failed verdict's reasons, long node names.
        context["image"] = "registry.example.com/rocm/pytorch-training:v25.5-aorta-custom-build"
        status = "FAILED" if index == 150 else "COMPLETED"
        run = dict(sample, run_id=f"run-{index:03d}", started_epoch=1796000000 + 3600 * index, status=status)
        slow = [f"mi300x-node-{index:04d}.cluster.example.com"] if index > 180 else []
        if slow:
            reason = (
                f"slow node: node {slow[0]}: compute +30% over the median node (ranks 8-15; slowest in 6 of 6 steps)"
            )
            run["verdict"] = {
                "verdict": "FAIL",
                "reasons": [reason, "threshold max_avg_iteration_ms: measured 33.5 exceeds 1"],
            }
        (folder / "run.json").write_text(json.dumps(dict(run, context=context)))
        step = 50 * rng.gauss(1, 0.03) * (1.3 if index > 180 else 1.0)
        report = {"performance": {"avg_step_time_ms": step, "avg_iteration_time_ms": 6 * step}, "run": {}}
        report["slow_nodes"] = [{"node": node} for node in slow]
        report["run"]["samples_per_second"] = 8 * 4 / (step / 1000)
        (folder / "aorta_benchmark_report.json").write_text(json.dumps(report))
        (folder / "report.html").write_text("<html></html>")
    found = _history.rebuild(str(tmp_path))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "history-200-runs.png"
    dom = open_in_browser(Path(found["index_html"]), shot, WIDTH, width=1400)
    assert shot.stat().st_size > 10_000
    assert "<svg" in dom and 'href="run-199/report.html"' in dom and "FAILED" in dom
    # The runs table fits a 1400-pixel window: its last column (the files) is not cut off.
    right, window = (int(re.search(rf'data-{key}="(\d+)"', dom).group(1)) for key in ("table-right", "window"))
    assert 0 < right <= window, (right, window)


def test_the_scaling_page_opens_in_chromium_without_error(tmp_path):
    """scaling.html of a campaign of 64 nodes (_rungs.campaign, each group's figures scripted: one
    node 1.6x slow, 4 % of throughput per node lost per doubling), as a person opens it: no script
    error, no SVG text cut at its edge, a dot per group, every group's report linked, the tables
    within the window; kept as a screenshot."""
    nodes = [f"mi300x-node-{i:04d}.cluster.example.com" for i in range(64)]
    slow = nodes[37]

    def run_groups(label, groups):
        runs = []
        for number, group in enumerate(groups):
            pace = (1.6 if slow in group else 1.0) * (1 + 0.04 * math.log2(len(group)))
            runs.append(
                {
                    "nodes": group,
                    "dir": f"{label}/g{number}",
                    "run_id": f"camp-{label}-g{number}",
                    "status": "COMPLETED",
                    "iteration_ms": 100.0 * pace,
                    "samples_per_second": 100.0 * len(group) / pace,
                }
            )
        return runs

    document = _rungs.campaign("camp", nodes, {"aorta_scaling_seed": 4}, run_groups)
    assert [entry["node"] for entry in document["named"]] == [slow]
    page = tmp_path / "scaling.html"
    page.write_text(_scaling_page.render_html(document))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "scaling-64-nodes.png"
    dom = open_in_browser(page, shot, MEASURE + WIDTH, width=1400)
    assert shot.stat().st_size > 10_000
    groups = [g for rung in document["rungs"] for g in rung["groups"]]
    assert dom.count("<circle") == len(groups) and 'class="bad"' in dom
    for group in [*groups, document["opening"]]:
        assert f'href="{group["dir"]}/report.html"' in dom
    assert int(re.search(r'data-texts="(\d+)"', dom).group(1)) > 0
    assert re.search(r'data-clipped="(\d+)"', dom).group(1) == "0", re.search(r'data-clipped-first="([^"]*)"', dom)
    right, window = (int(re.search(rf'data-{key}="(\d+)"', dom).group(1)) for key in ("table-right", "window"))
    assert 0 < right <= window, (right, window)
