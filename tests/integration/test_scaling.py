# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The scaling ladder on four stand-in nodes of its own, as a user runs it (ansible-playbook
aorta.cluster.scaling -i cluster.json): a healthy campaign runs the opening run of every node, then
rungs 1, 2 and 4, and names nobody; with one node's compute 1.6x slower (standin.py slow), that node
is named at rung 1 and the higher rungs run without it, the top rung on the other three; with one
node's link throttled (standin.py throttle), the opening run's sweep names it, before rung 2, and
every rung runs without it. campaign.json, junit.xml, scaling.html and every group's own results
(run.json, report) agree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import BIN, ENV, REPO, STRAGGLER_PROFILE, machine_share

# One worker starts the four nodes once for the three campaigns.
pytestmark = [pytest.mark.standin, pytest.mark.xdist_group("scaling")]

STANDIN = REPO / "tests" / "standin" / "standin.py"
# Each rank computes 150 ms a step (a sleep, as a GPU kernel leaves the host idle). The rest of a
# step (gloo, Python) takes the CPU: beside the other worker's runs on the two shared cores it
# varied by up to 11 ms a step (make test of 2026-12-08: with 50 ms of compute, a healthy pair ran
# 1.17x the other and the campaign held it against them, above the 15 % bound). Against 150 ms that
# is some 7 %; a node 1.6x slower is still some 1.5x the median iteration. Eight steps: 0.8 s a run.
PROFILE = dict(STRAGGLER_PROFILE, **{"standin.compute_ms": 150})
NODES = 4


class Four:
    """A stand-in cluster of four nodes: an instance of its own beside the worker's three."""

    def __init__(self) -> None:
        self.instance = (os.environ.get("PYTEST_XDIST_WORKER") or "") + "s"
        self.env = dict(os.environ, AORTA_STANDIN_INSTANCE=self.instance)
        self.out = REPO / "build" / f"standin-{self.instance}"

    def standin(self, *args: str) -> None:
        subprocess.run([sys.executable, str(STANDIN), *args], env=self.env, check=True, capture_output=True)

    @property
    def nodes(self) -> list[str]:
        return list(json.loads((self.out / "cluster.json").read_text())["node_dict"])

    def argv(self, where: Path, **extra) -> list[str]:
        given = {"aorta_results_dir": str(where), "aorta_training_overrides": PROFILE, **extra}
        argv = [str(BIN / "ansible-playbook"), "aorta.cluster.scaling", "-i", str(self.out / "cluster.json")]
        return [*argv, "-e", f"@{self.out / 'vars.yml'}", "-e", json.dumps(given)]

    def containers_left(self) -> list[str]:
        """Containers of any aorta run still on any of the four nodes (the stand-in's docker in each)."""
        names = [f"aorta-standin-{self.instance}-n{i}" for i in range(NODES)]
        argv = ["docker", "ps", "-a", "--filter", "label=aorta.cluster.run", "-q"]
        return [
            line
            for name in names
            for line in subprocess.run(
                ["docker", "exec", name, *argv], capture_output=True, text=True, check=True
            ).stdout.split()
        ]

    def campaign(self, tmp_path: Path, **extra) -> tuple[subprocess.CompletedProcess, dict, Path]:
        where = tmp_path / "campaign"
        argv = self.argv(where, **extra)
        proc = subprocess.run(argv, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=900, check=False)
        (tmp_path / "campaign.ansible.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        found = where / "campaign.json"
        assert found.exists(), proc.stdout[-4000:]
        return proc, json.loads(found.read_text()), where


# Session-scoped: with --dist loadgroup the worker may run another module's tests between these,
# and a module-scoped cluster would then be taken down and started again (89 s each, measured).
@pytest.fixture(scope="session")
def four():
    cluster = Four()
    with machine_share(whole=False):
        cluster.standin("up", "--nodes", str(NODES))
    yield cluster
    with machine_share(whole=False):
        cluster.standin("down")


def agree(document: dict, where: Path) -> None:
    """Every group's own results say what campaign.json says of it; junit.xml has a case per rung
    and per named node; scaling.html links every group's report."""
    page = (where / "scaling.html").read_text()
    opening = document["opening"]
    if opening:
        record = json.loads((where / opening["dir"] / "run.json").read_text())
        assert (record["run_id"], record["status"], len(record["nodes"])) == (
            opening["run_id"],
            opening["status"],
            opening["nodes"],
        )
        assert f'href="{opening["dir"]}/report.html"' in page
    for rung in document["rungs"]:
        for group in rung["groups"]:
            record = json.loads((where / group["dir"] / "run.json").read_text())
            assert record["run_id"] == group["run_id"] and record["status"] == group["status"]
            assert [n["name"] for n in sorted(record["nodes"], key=lambda n: n["rank"])] == group["nodes"]
            report = json.loads((where / group["dir"] / "aorta_benchmark_report.json").read_text())
            assert round(report["performance"]["avg_step_time_ms"], 3) == round(group["iteration_ms"], 3)
            assert f'href="{group["dir"]}/report.html"' in page
    # The results root's history lists the campaign, as campaign.json says it.
    index = json.loads((where.parent / "index.json").read_text())
    (row,) = [c for c in index["campaigns"] if c["campaign_id"] == document["campaign_id"]]
    assert row["verdict"] == document["verdict"] and row["sizes"] == [r["size"] for r in document["rungs"]]
    assert row["named"] == [entry["node"] for entry in document["named"]] and row["links"]["page"].endswith("html")
    suite = ET.parse(where / "junit.xml").getroot().find("testsuite")
    cases = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    expected = [
        f"rung {r['size']}: {len(r['groups'])} group{'s' if len(r['groups']) > 1 else ''}" for r in document["rungs"]
    ]
    expected += [f"node {entry['node']}" for entry in document["named"]]
    expected += [f"opening: {opening['nodes']} nodes"] if opening else []
    assert sorted(cases) == sorted(expected)
    failed = sorted(name for name, failure in cases.items() if failure is not None)
    opened_badly = [f"opening: {opening['nodes']} nodes"] if opening and opening["status"] != "COMPLETED" else []
    assert failed == sorted([f"node {entry['node']}" for entry in document["named"]] + opened_badly)


def test_a_healthy_campaign_runs_rungs_1_2_and_4_and_names_nobody(four, tmp_path):
    proc, document, where = four.campaign(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert document["verdict"] == {"verdict": "PASS", "reasons": []}, document["rungs"]
    assert [r["size"] for r in document["rungs"]] == [1, 2, 4]
    assert [r["completed"] for r in document["rungs"]] == [4, 2, 1]
    assert document["named"] == [] and document["left"] == four.nodes
    assert document["opening"]["status"] == "COMPLETED" and document["opening"]["left_to_rung_1"] == []
    # The pairs share no node of rung 1's groups (each was alone); efficiency is against rung 1.
    assert document["rungs"][1]["shared_pairs"] == 0 and document["rungs"][0]["efficiency"] == 1.0
    agree(document, where)
    # One line per rung on the console, whatever the node count.
    assert proc.stdout.count("groups completed on 4 nodes") + proc.stdout.count("group completed on 4") == 3
    assert "opening run of every node (4): COMPLETED; named nobody" in proc.stdout


def test_a_slow_node_is_named_at_rung_1_and_the_higher_rungs_run_without_it(four, tmp_path):
    slow = four.nodes[2]
    four.standin("slow", "--node", "2", "--factor", "1.6")
    try:
        # No opening run: it would leave the node's compute to rung 1 (unit-tested), at a run's cost.
        proc, document, where = four.campaign(tmp_path, aorta_scaling_opening=False)
    finally:
        four.standin("slow", "--node", "2", "--factor", "1")
    assert proc.returncode != 0
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [(slow, 1, "slow_node")], document
    assert document["verdict"]["reasons"] == [f"named 1 node: {slow}"]
    # Rung 2 on the three left: one pair, one node sits out; the top rung on the three.
    assert [r["size"] for r in document["rungs"]] == [1, 2, 3]
    assert len(document["rungs"][1]["left_out"]) == 1
    later = [n for rung in document["rungs"][1:] for g in rung["groups"] for n in g["nodes"]]
    assert slow not in later and sorted(document["rungs"][2]["groups"][0]["nodes"]) == sorted(document["left"])
    assert document["left"] == [n for n in four.nodes if n != slow]
    agree(document, where)
    assert f"campaign {document['campaign_id']}: FAIL: named 1 node: {slow}" in proc.stdout


def test_a_throttled_link_is_named_by_the_opening_run_and_no_rung_runs_it(four, tmp_path):
    """A pair's sweep reads one stream at both ends and cannot say which is slow; the opening run's
    sweep of all four nodes (three rounds, distinct partners) puts it on the node."""
    slow = four.nodes[1]
    four.standin("throttle", "--node", "1", "--rate", "1gbit")
    try:
        # The opening and rung 2, the rung a pair's sweep would have left unresolved.
        proc, document, where = four.campaign(tmp_path, aorta_scaling_sizes=[2])
    finally:
        four.standin("throttle", "--node", "1", "--rate", "")
    assert proc.returncode != 0
    assert [(e["node"], e["rung"], e["kind"]) for e in document["named"]] == [(slow, 0, "slow_link")], document
    # send, or both (the throttled egress delays the ACKs of what the node receives too): seen each way.
    evidence = document["named"][0]["evidence"]
    assert evidence.startswith("the opening run of every node: fabric sweep: ") and "x its run's median" in evidence
    sweep = json.loads((where / document["opening"]["dir"] / "run.json").read_text())["fabric_sweep"]
    assert [item["node"] for item in sweep["slow"]] == [slow]
    assert [r["size"] for r in document["rungs"]] == [2] and len(document["rungs"][0]["left_out"]) == 1
    assert all(slow not in g["nodes"] for rung in document["rungs"] for g in rung["groups"])
    agree(document, where)


def test_a_dead_node_ends_its_groups_run_not_the_campaign(four, tmp_path):
    """Node 3 powered off behind its switch (its stand-in paused: SSH hangs) before the campaign: the
    opening run of every node fails at its preflight naming it, the node leaves the campaign, and
    the top rung runs on the other three and completes (rung 1 left out: the slow-node case runs it)."""
    dead = four.nodes[3]
    container = f"aorta-standin-{four.instance}-n3"
    subprocess.run(["docker", "pause", container], check=True, capture_output=True)
    try:
        proc, document, where = four.campaign(tmp_path, aorta_scaling_sizes=[3], aorta_connect_timeout=5)
    finally:
        subprocess.run(["docker", "unpause", container], check=True, capture_output=True)
    assert proc.returncode != 0
    assert document["opening"]["status"] == "FAILED", document["opening"]
    assert [(e["node"], e["rung"]) for e in document["named"]] == [(dead, 0)], document["named"]
    evidence = document["named"][0]["evidence"]
    assert document["named"][0]["kind"] == "failed" and f"preflight[ssh]: unreachable: {dead}" in evidence, evidence
    assert [(r["size"], r["completed"], r["group_count"]) for r in document["rungs"]] == [(3, 1, 1)]
    assert all(dead not in g["nodes"] for r in document["rungs"] for g in r["groups"])
    assert document["left"] == four.nodes[:3] and document["verdict"]["reasons"] == [f"named 1 node: {dead}"]
    agree(document, where)
    assert four.containers_left() == []


def test_ctrl_c_stops_every_group_of_a_rung_and_names_nobody(four, tmp_path):
    """The terminal's Ctrl-C (SIGINT to the campaign's process group) during rung 1: every group's
    run gets it as its own first Ctrl-C (its ansible-playbook runs in a session of its own), stops its
    node and records STOPPED; the rung is not judged, no later rung starts, no container is left."""
    where = tmp_path / "campaign"
    log = tmp_path / "campaign.ansible.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            four.argv(where, aorta_scaling_opening=False),
            cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        # Every rung-1 group has launched its container (its supervisor is running the steps).
        deadline = time.monotonic() + 300
        logs = [where / "k1" / f"g{i}.console.log" for i in range(NODES)]
        while time.monotonic() < deadline and not all(
            p.exists() and "Launch on every node at once" in p.read_text() for p in logs
        ):
            time.sleep(0.5)
        time.sleep(3)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=300) != 0
    document = json.loads((where / "campaign.json").read_text())
    assert document["stopped"] is True and document["rungs"] == [] and document["named"] == []
    assert document["notes"] == ["rung 1 was stopped: not judged"]
    statuses = [json.loads((where / "k1" / f"g{i}" / "run.json").read_text())["status"] for i in range(NODES)]
    assert statuses == ["STOPPED"] * NODES, statuses
    assert not (where / "k2").exists()
    assert four.containers_left() == []
    assert f"campaign {document['campaign_id']}: FAIL: stopped (Ctrl-C) after 0 rungs" in log.read_text()


def test_a_stop_by_the_campaigns_id_from_another_controller_stops_every_group_and_the_campaign(four, tmp_path):
    """aorta.cluster.stop -e aorta_run_id=<campaign id>, run apart from the campaign (another
    ansible-playbook, as from another controller) while rung 2's two pairs run: each node answers for
    its pair's run, both pairs' heads are asked, every run records STOPPED; the campaign sees it,
    starts nothing more and records what stopped it; no container is left."""
    where = tmp_path / "campaign"
    campaign_id = f"stop-{os.getpid()}-{int(time.time())}"
    log = tmp_path / "campaign.ansible.log"
    argv = four.argv(where, aorta_run_id=campaign_id, aorta_scaling_opening=False, aorta_scaling_sizes=[2, 4])
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        logs = [where / "k2" / f"g{i}.console.log" for i in range(2)]
        while time.monotonic() < deadline and not all(
            p.exists() and "Launch on every node at once" in p.read_text() for p in logs
        ):
            time.sleep(0.5)
        time.sleep(3)
        stop = [str(BIN / "ansible-playbook"), "aorta.cluster.stop", "-i", str(four.out / "cluster.json")]
        stop += ["-e", f"@{four.out / 'vars.yml'}", "-e", f"aorta_run_id={campaign_id}"]
        stopped = subprocess.run(stop, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300, check=False)
        (tmp_path / "stop.ansible.log").write_text(stopped.stdout + "\n--- stderr ---\n" + stopped.stderr)
        assert stopped.returncode == 0, stopped.stdout[-3000:]
        assert f"stop {campaign_id}: a scaling campaign: asked the heads of its group runs " in stopped.stdout
        assert f"({campaign_id}-k2-g0, {campaign_id}-k2-g1) to stop every node" in stopped.stdout
        assert proc.wait(timeout=300) != 0
    document = json.loads((where / "campaign.json").read_text())
    assert document["stopped"] is True and document["rungs"] == [] and document["named"] == []
    assert document["stopped_by"].startswith(f"aorta.cluster.stop of {campaign_id}-k2-g"), document["stopped_by"]
    records = [json.loads((where / "k2" / f"g{i}" / "run.json").read_text()) for i in range(2)]
    assert [r["status"] for r in records] == ["STOPPED"] * 2, [r.get("message") for r in records]
    # The group the record names was stopped by the stop; the other by the stop or, where its run ended
    # later, by the campaign's Ctrl-C in turn.
    (named,) = [r for r in records if document["stopped_by"].endswith(r["run_id"])]
    assert "stopped by aorta.cluster.stop from " in named["message"], named["message"]
    assert not (where / "k4").exists()
    assert four.containers_left() == []
