# SPDX-License-Identifier: GPL-3.0-or-later
"""The history of runs under a results root: each run's row, index.json and index.html (escaped,
without script) kept under a lock (several runs may end at once), and the earlier run
``aorta_baseline: auto`` chooses from it (results/_judging). Run directories are made from
docs/samples/run.json."""

from __future__ import annotations

import copy
import json
import multiprocessing
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._run_context import effective_config
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _fingerprint as fpr
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _history as hi
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _judging as judging

REPO = Path(__file__).resolve().parents[5]


SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


START = SAMPLE["started_epoch"]


OTHER_IMAGE = "sha256:" + "cd" * 32


# The sample's base config as its head read it (its effective_config is this, without overrides).
STANDIN_CONFIG = (REPO / "tests" / "standin" / "workload" / "config" / "standin.yaml").read_text()


def run_doc(run_id: str, started: int = START, **changes) -> dict:
    """The sample run.json as run ``run_id``; ``changes``: image_id, status, overrides, base_config,
    config_text (the base config's content), verdict, or a callable ``edit`` given the document. The
    effective config follows the overrides and the content as run_record writes it."""
    run = copy.deepcopy(SAMPLE)
    run["run_id"], run["started_epoch"], run["finished_epoch"] = run_id, started, started + 20
    for key in ("image", "image_id", "overrides", "base_config", "gpus_per_node"):
        if key in changes:
            run["context"][key] = changes[key]
    if "overrides" in changes or "config_text" in changes:
        text = changes.get("config_text", STANDIN_CONFIG)
        run["context"]["effective_config"] = effective_config(text, run["context"]["overrides"])
    if "status" in changes:
        run["status"] = changes["status"]
    if "verdict" in changes:
        run["verdict"] = changes["verdict"]
    if "edit" in changes:
        changes["edit"](run)
    return run


def report_doc(step_ms: float = 100.0, samples: float | None = 160.0, **extra) -> dict:
    return {
        "status": "completed",
        "performance": {"avg_step_time_ms": step_ms, "avg_iteration_time_ms": step_ms * 6},
        "run": {"samples_per_second": samples, "tokens_per_second": None},
        "slow_nodes": [],
        "stragglers": [],
        **extra,
    }


def make_run(root: Path, run_id: str, started: int = START, report: dict | None = None, **changes) -> Path:
    """``<root>/<run_id>/`` with run.json, and the report's json and html when ``report`` is given."""
    path = root / run_id
    path.mkdir(parents=True, exist_ok=True)
    (path / "run.json").write_text(json.dumps(run_doc(run_id, started, **changes)))
    if report is not None:
        (path / "aorta_benchmark_report.json").write_text(json.dumps(report))
        (path / "report.html").write_text("<html></html>")
    return path


class Page(HTMLParser):
    """What a test reads of a page: tags, links, the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for name, value in attrs if name == "href" and value]

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def index_rows(root: Path) -> list[dict]:
    return json.loads((root / "index.json").read_text())["runs"]


def test_entry_of_a_run_with_a_report(tmp_path):
    report = report_doc(
        120.0,
        samples=80.0,
        slow_nodes=[{"node": "192.168.144.2"}],
        stragglers=[{"rank": 3, "node": "192.168.144.2"}],
        baseline={"verdict": "regression"},
    )
    verdict = {"verdict": "FAIL", "reasons": ["step time regressed"]}
    path = make_run(tmp_path, "r1", report=report, verdict=verdict)
    (path / "junit.xml").write_text("<testsuites/>")
    row = hi.entry(str(path))
    assert row is not None
    assert row["run_id"] == "r1" and row["dir"] == "r1" and row["status"] == "COMPLETED"
    assert row["verdict"] == verdict
    assert (row["nodes"], row["gpus_per_node"]) == (2, 2)
    assert (row["step_time_ms"], row["iteration_time_ms"], row["samples_per_second"]) == (120.0, 720.0, 80.0)
    assert row["slow_nodes"] == ["192.168.144.2"] and row["straggler_ranks"] == [3]
    assert row["baseline_verdict"] == "regression"
    assert row["links"] == {"report": "r1/report.html", "run_json": "r1/run.json", "junit": "r1/junit.xml"}
    assert row["fingerprint_id"] == fpr.fingerprint_id(fpr.fingerprint(SAMPLE))
    assert hi.entry(str(tmp_path / "nothing")) is None


def test_entry_without_a_report_counts_the_drift(tmp_path):
    drift = [{"field": "rocm", "label": "ROCm", "majority": "6.2.4", "count": 1, "of": 2, "nodes": []}]
    path = make_run(tmp_path, "r1", edit=lambda run: run.update(drift=drift))
    row = hi.entry(str(path))
    assert row is not None
    assert row["has_report"] is False and row["step_time_ms"] is None
    assert row["drift"] == 1 and row["drift_lines"] == ["ROCm: 1 of 2 nodes differ"]
    assert row["links"] == {"run_json": "r1/run.json"}


def test_update_adds_and_replaces_rows_newest_first(tmp_path):
    root = tmp_path / "results"
    first = make_run(root, "r1", START, report=report_doc(100.0))
    result = hi.update(str(root), str(first))
    assert result == {
        "index_json": str(root / "index.json"),
        "index_html": str(root / "index.html"),
        "runs": 1,
        "campaigns": 0,
        "added": True,
    }
    assert [r["run_id"] for r in index_rows(root)] == ["r1"]
    second = make_run(root, "r2", START + 100, status="FAILED")
    third = make_run(root, "r3", START + 50, report=report_doc(110.0))
    hi.update(str(root), str(second))
    hi.update(str(root), str(third))
    assert [r["run_id"] for r in index_rows(root)] == ["r2", "r3", "r1"]
    # The same run again: its row replaced, not added.
    (second / "aorta_benchmark_report.json").write_text(json.dumps(report_doc(90.0)))
    assert hi.update(str(root), str(second))["runs"] == 3
    rows = index_rows(root)
    assert [r["run_id"] for r in rows] == ["r2", "r3", "r1"]
    assert rows[0]["step_time_ms"] == 90.0
    assert not list(root.glob("*.tmp"))


def test_index_json_holds_each_effective_config_once_and_reads_back_the_rows_whole(tmp_path):
    root = tmp_path / "results"
    for index in range(4):
        run = make_run(root, f"r{index}", START + index, report=report_doc(), overrides={"training.lr": index % 2})
        hi.update(str(root), str(run))
    document = json.loads((root / "index.json").read_text())
    assert document["format"] == hi.INDEX_FORMAT and len(document["configs"]) == 2
    assert {row["fingerprint"]["config"]["effective_ref"] for row in document["runs"]} == set(document["configs"])
    # Read back, each row's fingerprint is what fingerprint() makes of its run.json: the choice finds it.
    expected = {f"r{i}": fpr.fingerprint(run_doc(f"r{i}", overrides={"training.lr": i % 2})) for i in range(4)}
    assert {row["run_id"]: row["fingerprint"] for row in hi._indexed(str(root))} == expected
    path, _why = judging.choose_baseline(str(root), run_doc("r9", START + 90, overrides={"training.lr": 1}))
    assert path == str(root / "r3")
    # A row of an index written before (format 1: the config in the row itself) is read as it is.
    rows = hi._indexed(str(root))
    (root / "index.json").write_text(json.dumps({"format": 1, "runs": rows}))
    assert hi._indexed(str(root)) == rows


def test_update_reads_the_index_not_every_run(tmp_path):
    root = tmp_path / "results"
    first = make_run(root, "r1", START)
    hi.update(str(root), str(first))
    # A run directory the index does not know stays out until a rebuild (or its own update).
    make_run(root, "r2", START + 10)
    third = make_run(root, "r3", START + 20)
    hi.update(str(root), str(third))
    assert [r["run_id"] for r in index_rows(root)] == ["r3", "r1"]
    assert hi.rebuild(str(root))["runs"] == 3


def test_update_without_an_index_reads_the_runs_there(tmp_path):
    root = tmp_path / "results"
    make_run(root, "r1", START)
    (root / "index.json").write_text("{not json")
    result = hi.update(str(root), str(make_run(root, "r2", START + 10)))
    assert result["runs"] == 2 and [r["run_id"] for r in index_rows(root)] == ["r2", "r1"]
    assert hi.update(str(root), str(root / "empty"))["added"] is False


def test_index_html_is_valid_linked_escaped_and_without_script(tmp_path):
    root = tmp_path / "results"
    report = report_doc(100.0, slow_nodes=[{"node": "<b>evil&node</b>"}], stragglers=[{"rank": 5}])
    verdict = {"verdict": "FAIL", "reasons": ["<script>alert(1)</script>"]}
    hi.update(str(root), str(make_run(root, "r1", START, report=report, verdict=verdict)))
    hi.update(str(root), str(make_run(root, "r2", START + 10, report=report_doc(110.0), image="img<x>")))
    text = (root / "index.html").read_text()
    page = parse(text)
    assert "script" not in page.tags
    assert "<script" not in text and "<b>evil" not in text
    assert "&lt;b&gt;evil&amp;node&lt;/b&gt;" in text and "img&lt;x&gt;" in text
    joined = "".join(page.text)
    assert "<b>evil&node</b>" in joined and "rank 5" in joined and "<script>alert(1)</script>" in joined
    assert {"r1/report.html", "r1/run.json", "r2/report.html"} <= set(page.links)
    fp_id = fpr.fingerprint_id(fpr.fingerprint(SAMPLE))
    assert f"#fp-{fp_id}" in page.links
    assert "svg" in page.tags and "circle" in page.tags and "title" in page.tags
    assert "step time (ms)" in joined and "throughput (samples/s)" in joined
    # Newest first in the table.
    assert text.index(">r2<") < text.index(">r1<")
    # A fingerprint's line says the config as its newest run was given it, and how many keys count.
    assert "config config/standin.yaml without overrides (effective config compared: 2 keys)" in joined


def test_concurrent_updates_lose_no_row(tmp_path):
    root = tmp_path / "results"
    dirs = [str(make_run(root, f"r{i:02d}", START + i, report=report_doc(100.0 + i))) for i in range(24)]
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        pool.starmap(hi.update, [(str(root), d) for d in dirs])
    assert sorted(r["run_id"] for r in index_rows(root)) == [f"r{i:02d}" for i in range(24)]
    assert not list(root.glob("*.tmp"))


def test_rebuild_equals_the_sum_of_updates(tmp_path):
    root = tmp_path / "results"
    dirs = [
        make_run(root, "r1", START, report=report_doc(100.0)),
        make_run(root, "r2", START + 30, status="FAILED"),
        make_run(root, "r3", START + 10, report=report_doc(95.0), image_id=OTHER_IMAGE),
    ]
    (root / "not-a-run").mkdir()
    for path in dirs:
        hi.update(str(root), str(path))
    updated = index_rows(root)
    assert hi.rebuild(str(root))["runs"] == 3
    assert index_rows(root) == updated


def campaign_doc(campaign_id: str, started: int, named=("n2",), stopped=False) -> dict:
    """campaign.json as the campaign writes it (plugin_utils/campaign/_document), the keys a row reads."""
    return {
        "campaign_id": campaign_id,
        "started_epoch": started,
        "finished_epoch": started + 400,
        "nodes": ["n0", "n1", "n2", "n3"],
        "left": [n for n in ["n0", "n1", "n2", "n3"] if n not in named],
        "rungs": [
            {"size": 1, "samples_per_second_per_node": 160.0, "efficiency": 1.0},
            {"size": 2, "samples_per_second_per_node": 150.0, "efficiency": 0.94},
            {"size": 3, "samples_per_second_per_node": 144.0, "efficiency": 0.9},
        ],
        "named": [{"node": n, "rung": 1, "kind": "slow_node", "evidence": "x"} for n in named],
        "stopped": stopped,
        "verdict": {"verdict": "FAIL" if named else "PASS", "reasons": [f"named 1 node: {n}" for n in named]},
    }


def make_campaign(root: Path, campaign_id: str, started: int, **changes) -> Path:
    path = root / campaign_id
    (path / "k1" / "g0").mkdir(parents=True)
    (path / "campaign.json").write_text(json.dumps(campaign_doc(campaign_id, started, **changes)))
    (path / "scaling.html").write_text("<html></html>")
    return path


def test_a_campaign_has_a_row_of_its_own_kept_apart_from_the_runs(tmp_path):
    root = tmp_path / "results"
    run = make_run(root, "r1", START, report=report_doc(100.0))
    hi.update(str(root), str(run))
    campaign = make_campaign(root, "c<1>", START + 50)
    document = json.loads((campaign / "campaign.json").read_text())
    assert hi.update_campaign(str(root), str(campaign), document)["campaigns"] == 1
    index = json.loads((root / "index.json").read_text())
    assert [r["run_id"] for r in index["runs"]] == ["r1"]
    (row,) = index["campaigns"]
    assert row == {
        "campaign_id": "c<1>",
        "dir": "c<1>",
        "started_epoch": START + 50,
        "finished_epoch": START + 450,
        "status": "COMPLETED",
        "verdict": {"verdict": "FAIL", "reasons": ["named 1 node: n2"]},
        "nodes": 4,
        "left": 3,
        "sizes": [1, 2, 3],
        "per_node_rate": 160.0,
        "top_efficiency": 0.9,
        "named": ["n2"],
        "links": {"page": "c<1>/scaling.html", "campaign_json": "c<1>/campaign.json"},
    }
    # A run that ends later keeps the campaign's row; the campaign again replaces its own; a second is added.
    hi.update(str(root), str(make_run(root, "r2", START + 60)))
    document["stopped"] = True
    (campaign / "campaign.json").write_text(json.dumps(document))
    hi.update_campaign(str(root), str(campaign), document)
    hi.update_campaign(
        str(root), str(make_campaign(root, "c2", START + 90, named=())), campaign_doc("c2", START + 90, ())
    )
    index = json.loads((root / "index.json").read_text())
    assert [r["run_id"] for r in index["runs"]] == ["r2", "r1"]
    assert [(c["campaign_id"], c["status"]) for c in index["campaigns"]] == [("c2", "COMPLETED"), ("c<1>", "STOPPED")]
    # Rebuilt from the directories: the same rows; the campaign is never a run nor a baseline.
    kept = index["campaigns"]
    assert hi.rebuild(str(root))["campaigns"] == 2
    assert json.loads((root / "index.json").read_text())["campaigns"] == kept
    assert [r["run_id"] for r in hi.indexed_rows(str(root))] == ["r2", "r1"]
    # index.html: the campaigns' table above the runs, the id escaped, its page linked.
    text = (root / "index.html").read_text()
    page = parse(text)
    assert "c%3C1%3E/scaling.html" in page.links and "c&lt;1&gt;" in text and "<script" not in text
    assert text.index("Scaling campaigns") < text.index("<h2>Runs</h2>")
    assert "STOPPED" in page.text and "0.90" in page.text


def baseline_root(tmp_path: Path) -> Path:
    """r1 and r2 comparable and COMPLETED with reports, r3 FAILED, r4 on another image, r5 with no
    report; then the run being judged, r9 (newest)."""
    root = tmp_path / "results"
    make_run(root, "r1", START, report=report_doc(100.0))
    make_run(root, "r2", START + 10, report=report_doc(101.0))
    make_run(root, "r3", START + 20, report=report_doc(150.0), status="FAILED")
    make_run(root, "r4", START + 30, report=report_doc(90.0), image_id=OTHER_IMAGE)
    make_run(root, "r5", START + 40)
    make_run(root, "r9", START + 90, report=report_doc(99.0))
    return root


@pytest.mark.parametrize("indexed", [True, False])
def test_choose_baseline_takes_the_newest_completed_run_with_the_same_fingerprint(tmp_path, indexed):
    root = baseline_root(tmp_path)
    if indexed:
        hi.rebuild(str(root))
    path, why = judging.choose_baseline(str(root), run_doc("r9", START + 90))
    assert path == str(root / "r2")
    fp_id = fpr.fingerprint_id(fpr.fingerprint(SAMPLE))
    assert why == f"newest COMPLETED run with the same fingerprint {fp_id}: r2 (2026-12-02 04:26:34 UTC)"


def test_choose_baseline_passes_over_a_run_whose_verdict_failed_on_a_finding_not_on_a_threshold(tmp_path):
    """A run that regressed (or found a slow link) failed its verdict on a finding: no standard for
    the next. One that failed only a threshold (a bound the user set) still is."""
    root = baseline_root(tmp_path)
    failed = {"verdict": "FAIL", "reasons": ["regression against the baseline: avg step time 130 ms"]}
    make_run(root, "r6", START + 50, report=report_doc(130.0), verdict=failed)
    path, _why = judging.choose_baseline(str(root), run_doc("r9", START + 90))
    assert path == str(root / "r2")
    bound = {"verdict": "FAIL", "reasons": ["threshold max_avg_iteration_ms: measured 33.5 exceeds 1"]}
    make_run(root, "r7", START + 60, report=report_doc(100.0), verdict=bound)
    path, _why = judging.choose_baseline(str(root), run_doc("r9", START + 90))
    assert path == str(root / "r7")


def test_choose_baseline_skips_the_run_itself_and_later_runs(tmp_path):
    root = baseline_root(tmp_path)
    hi.rebuild(str(root))
    assert judging.choose_baseline(str(root), run_doc("r2", START + 10))[0] == str(root / "r1")
    # Judged again later: a newer comparable run is not its baseline.
    assert judging.choose_baseline(str(root), run_doc("r1", START))[0] is None


def test_choose_baseline_honours_ignored_keys(tmp_path):
    root = baseline_root(tmp_path)
    hi.rebuild(str(root))
    run = run_doc("r9", START + 90, overrides={"training.lr": 0.2})
    path, why = judging.choose_baseline(str(root), run)
    assert path is None
    assert why.startswith("no comparable run: 5 earlier runs, none with this fingerprint ")
    assert why.endswith("; the newest COMPLETED one, r5, differs in: config training.lr: 0.2 vs unset")
    assert judging.choose_baseline(str(root), run, ["training.lr"])[0] == str(root / "r2")


def test_choose_baseline_says_why_there_is_none(tmp_path):
    root = tmp_path / "results"
    assert judging.choose_baseline(str(root), run_doc("r9")) == (
        None,
        f"no comparable run: no earlier run under {root}",
    )
    make_run(root, "r1", START, report=report_doc(100.0), status="FAILED")
    make_run(root, "r2", START + 10)
    path, why = judging.choose_baseline(str(root), run_doc("r9", START + 90))
    fp_id = fpr.fingerprint_id(fpr.fingerprint(SAMPLE))
    assert path is None
    assert why == f"no comparable run: 2 earlier runs, 2 with this fingerprint {fp_id}, none COMPLETED with a report"
    make_run(root, "r3", START + 20, report=report_doc(100.0), image_id=OTHER_IMAGE)
    path, why = judging.choose_baseline(str(root), run_doc("r9", START + 90))
    assert path is None and "the newest COMPLETED one, r3, differs in: image id" in why
