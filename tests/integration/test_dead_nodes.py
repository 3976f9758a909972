# SPDX-License-Identifier: GPL-3.0-or-later
"""Dead nodes at the entry points, from the installed collection outside the checkout (no checkout
ansible.cfg): stand-in nodes paused (their SSH hangs, as a powered-off host behind a switch does;
nothing leaves the machine). Each case: the exit status, one line naming the nodes or the id and
what to do, a time bound, and every run record that existed before byte-identical after (a stop
appends its entry to its run's run.json, and only that).

The rows share one install and one stand-in cluster; with aorta_connect_timeout 5 each dead-node
case costs seconds, not a run."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import standin  # tests/standin, put on sys.path by conftest
from installed import BIN, install

TIMEOUT = 5  # aorta_connect_timeout: what a dead node costs each case
ENDED = "ended-run"


@pytest.fixture(scope="module")
def user(artifact, standin_cluster, tmp_path_factory):
    """A user's directory outside the checkout: the installed collection, a YAML inventory source for
    the stand-in's cluster file, and a results root holding the record of a run that has ended."""
    home = tmp_path_factory.mktemp("user")
    env = install(artifact, home)
    source = home / "cluster.aorta.yml"
    source.write_text(f"plugin: aorta.cluster.cluster_json\npath: {standin_cluster.cluster_json}\n")
    root = home / "aorta_results"
    ended = root / ENDED
    (ended / "logs").mkdir(parents=True)
    (ended / "run.json").write_text(json.dumps({"run_id": ENDED, "status": "FAILED", "message": "every node dead"}))
    (ended / "console.log").write_text("run ended-run: FAILED - every node dead\n")
    (ended / "junit.xml").write_text("<testsuites failures='1'/>\n")
    return {"home": home, "env": env, "source": source, "root": root}


def records(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def play(user, standin_cluster, playbook: str, *args: str, dead=(), **extra):
    """``ansible-playbook aorta.cluster.<playbook>`` as the user runs it, with the stand-in's nodes
    ``dead`` (indexes) paused for its length: (process, seconds)."""
    paused = [standin_cluster.nodes[i]["container"] for i in dead]
    values = {"aorta_results_root": str(user["root"]), "aorta_connect_timeout": TIMEOUT, **extra}
    argv = [str(BIN / "ansible-playbook"), f"aorta.cluster.{playbook}", "-i", str(user["source"])]
    argv += ["-e", f"@{standin.OUT / 'vars.yml'}", "-e", json.dumps(values), *args]
    if paused:
        subprocess.run(["docker", "pause", *paused], check=True, capture_output=True)
    began = time.monotonic()
    try:
        proc = subprocess.run(
            argv, cwd=user["home"], env=user["env"], capture_output=True, text=True, timeout=600, check=False
        )
    finally:
        if paused:
            subprocess.run(["docker", "unpause", *paused], check=True, capture_output=True)
    return proc, time.monotonic() - began


def kept(before: dict[Path, bytes], after: dict[Path, bytes]) -> bool:
    """Every file that was there before is there after, byte for byte (a new run adds its own)."""
    return {path: after.get(path) for path in before} == before


def lines_with(proc, text: str) -> list[str]:
    """The console's own lines holding ``text`` (Ansible's error block repeats a failure's msg on
    its "[ERROR]" line and in the "fatal:" result: counted once, as the result)."""
    return [line for line in proc.stdout.splitlines() if text in line and not line.startswith("[ERROR]")]


def test_a_dead_head_and_a_dead_worker_are_named_together_in_one_check(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "aorta_multinode", "--check", dead=(0, len(names) - 1))
    assert proc.returncode != 0 and "UNREACHABLE!" not in proc.stdout, proc.stdout[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("unhealthy: ")]
    assert line.startswith(f"unhealthy: 2 nodes: {names[0]}, {names[-1]} (--check: not written; a run lists")
    assert seconds < TIMEOUT + 45, seconds
    # A dry run leaves nothing in the results root: preflight's scratch (the head's verdict, which
    # the workers read) goes to the machine's temporary directory, and no results directory is made
    # for a console log.
    assert records(user["root"]) == before
    assert sorted(p.name for p in user["root"].iterdir()) == sorted(
        {p.relative_to(user["root"]).parts[0] for p in before}
    )


def test_every_node_dead_with_exclude_unhealthy_stops_before_launch_and_the_files_agree(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "aorta_multinode", dead=range(len(names)), aorta_exclude_unhealthy=True)
    assert proc.returncode != 0 and "UNREACHABLE!" not in proc.stdout, proc.stdout[-3000:]
    assert "Launch on every node at once" in proc.stdout  # reached, and refused there without a connection
    assert len(lines_with(proc, f"unhealthy: all {len(names)} nodes, listed in ")) == 1
    assert seconds < TIMEOUT + 45, seconds
    (new,) = [p for p in user["root"].iterdir() if p.name != ENDED and (p / "run.json").exists()]
    run = json.loads((new / "run.json").read_text())
    assert run["status"] == "FAILED" and f"launch: 0 of {len(names)} nodes passed preflight" in run["message"]
    assert [e["name"] for e in run["excluded"]] == [u["name"] for u in run["unhealthy"]] == names
    assert [line.split("\t")[0] for line in (new / "unhealthy.txt").read_text().splitlines()] == names
    assert not (new / "healthy.cluster.json").exists()
    assert kept(before, records(user["root"]))


def test_a_stop_with_every_node_dead_says_whom_it_could_not_reach_and_records_it(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    before = records(user["root"])
    run_json = user["root"] / ENDED / "run.json"
    proc, seconds = play(user, standin_cluster, "stop", dead=range(len(names)), aorta_run_id=ENDED)
    assert proc.returncode != 0, proc.stdout[-3000:]
    said = f"stop {ENDED}: no node answered; 0 of {len(names)} nodes' supervisors finished; could not reach "
    (line,) = lines_with(proc, said)
    assert f"could not reach {len(names)}: {', '.join(names)} (nothing asked of them" in line
    assert seconds < 2 * TIMEOUT + 30, seconds
    (entry,) = json.loads(run_json.read_text())["stops"]
    assert entry["unreachable"] == names and entry["finished"] == 0 and not entry["asked_head"]
    after = records(user["root"])
    assert {p: b for p, b in after.items() if p != run_json} == {p: b for p, b in before.items() if p != run_json}
    # The entry was appended; what the record held is still there.
    assert json.loads(run_json.read_text())["message"] == "every node dead"


def test_a_watch_of_a_run_recorded_already_is_refused_and_writes_nothing(user, standin_cluster):
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "watch", dead=range(len(standin_cluster.nodes)), aorta_run_id=ENDED)
    assert proc.returncode != 0
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("fatal: ") and "has ended and is recorded" in x]
    assert f"watch: run {ENDED} has ended and is recorded in {user['root'] / ENDED / 'run.json'} (FAILED: every" in line
    assert "aorta.cluster.trace_collect -e aorta_run_id=ended-run" in line and "-e aorta_results_dir=" in line
    assert seconds < 30, seconds  # refused on the controller: no node is waited on
    assert records(user["root"]) == before


def test_trace_collect_limited_to_one_node_says_what_picks_nodes(user, standin_cluster):
    node = standin_cluster.nodes[1]["mgmt_ip"]
    before = records(user["root"])
    proc, _seconds = play(user, standin_cluster, "trace_collect", "--limit", node, aorta_run_id=ENDED)
    assert proc.returncode == 2
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith(f"fatal: [{node}]")]
    assert "--limit left out localhost" in line and '\\"aorta_collect_nodes\\": [\\"' + node in line, line
    assert records(user["root"]) == before


def test_a_watch_limited_to_one_node_says_to_run_it_without_the_limit(user, standin_cluster):
    node = standin_cluster.nodes[1]["mgmt_ip"]
    before = records(user["root"])
    proc, _seconds = play(user, standin_cluster, "watch", "--limit", node, aorta_run_id=ENDED)
    assert proc.returncode == 2
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith(f"fatal: [{node}]")]
    assert "watch: --limit left out localhost" in line and "run it without --limit" in line, line
    assert "HostVarsVars" not in proc.stdout
    assert records(user["root"]) == before


@pytest.mark.parametrize("dead", [(), (-1,)], ids=["all-alive", "worker-dead"])
def test_a_stop_of_an_id_no_node_holds_is_refused_naming_the_head(user, standin_cluster, dead):
    head = standin_cluster.nodes[0]["mgmt_ip"]
    before = records(user["root"])
    paused = [len(standin_cluster.nodes) - 1] if dead else []
    proc, seconds = play(user, standin_cluster, "stop", dead=paused, aorta_run_id="no-such-run")
    assert proc.returncode != 0
    assert len(lines_with(proc, f"no run no-such-run on {head}: ")) == 1, proc.stdout[-3000:]
    assert seconds < 60, seconds
    assert records(user["root"]) == before


def recorded(user, run_id: str, tree: str = "") -> Path:
    """The record of a run that has ended, under the user's results root (``tree``: with a
    combined_traces tree holding one file of that node, as node 0)."""
    where = user["root"] / run_id
    (where / "logs").mkdir(parents=True)
    (where / "run.json").write_text(json.dumps({"run_id": run_id, "status": "COMPLETED", "message": "all done"}))
    (where / "console.log").write_text(f"run {run_id}: COMPLETED - all done\n")
    if tree:
        (where / "combined_traces" / "node_0").mkdir(parents=True)
        (where / "combined_traces" / "node_0" / "rank0.json").write_text("{}")
        node = {"rank": 0, "name": tree, "collected": True, "error": None, "state": "ok"}
        node["files"] = [{"path": "rank0.json", "size": 2, "sha256": "44136fa3", "ranks": [0]}]
        manifest = {"run_id": run_id, "expected_ranks": [0], "nodes": [node]}
        (where / "combined_traces" / "manifest.json").write_text(json.dumps(manifest))
    return where


def test_a_run_given_the_id_of_a_recorded_run_is_refused_before_anything(user, standin_cluster):
    where = recorded(user, "done-run")
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "aorta_multinode", aorta_run_id="done-run")
    assert proc.returncode != 0
    said = f"aorta_run_id: run done-run has ended and is recorded in {where / 'run.json'} (COMPLETED: all done)"
    assert len(lines_with(proc, said)) == 1, proc.stdout[-3000:]
    assert "leave aorta_run_id out" in proc.stdout and "Launch on every node" not in proc.stdout
    assert seconds < 30, seconds  # refused on the controller: no node is touched
    assert records(user["root"]) == before


def test_a_run_limited_to_one_node_launches_and_records_nothing(user, standin_cluster):
    node = standin_cluster.nodes[-1]["mgmt_ip"]
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "aorta_multinode", "--limit", node)
    assert proc.returncode != 0
    assert len(lines_with(proc, f'fatal: [{node}]: FAILED! => {{"changed": false, "msg": "1 of ')) == 1
    assert "a --limit or an AWX sliced job" in proc.stdout and "HostVarsVars" not in proc.stdout
    assert len(lines_with(proc, "aorta_multinode: nothing launched, nothing recorded")) == 1
    assert seconds < 30, seconds
    assert records(user["root"]) == before


def test_a_stop_limited_to_one_node_names_the_nodes_it_left_out(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    where = recorded(user, "stop-limited")
    before = records(user["root"])
    proc, _seconds = play(user, standin_cluster, "stop", "--limit", names[-1], aorta_run_id="stop-limited")
    (line,) = lines_with(proc, "stop stop-limited: ")
    assert line.startswith(f"stop stop-limited: its head {names[0]} was left out by --limit; 0 of {len(names)}")
    assert f"left out by --limit, nothing asked of them: {', '.join(names[:-1])} (run the stop" in line
    assert "containers removed now" not in line  # never said of a node the stop did not touch
    (entry,) = json.loads((where / "run.json").read_text())["stops"]
    assert entry["not_in_this_stop"] == names[:-1] and entry["not_finished"] == {}
    after = records(user["root"])
    assert {p: b for p, b in after.items() if p.name != "run.json"} == {
        p: b for p, b in before.items() if p.name != "run.json"
    }


def test_a_stop_with_a_dead_head_names_it_and_the_others_answer(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    proc, seconds = play(user, standin_cluster, "stop", dead=(0,), aorta_run_id="no-run-here")
    assert proc.returncode != 0
    (line,) = lines_with(proc, "stop no-run-here: ")
    assert f"could not reach 1: {names[0]} (nothing asked of them" in line
    assert f"0 of {len(names)} nodes' supervisors finished" in line and "; no run.json of it here" in line
    assert seconds < 2 * TIMEOUT + 30, seconds


def test_a_watch_of_an_id_no_node_holds_is_refused_with_the_head_alive_or_dead(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    before = records(user["root"])
    # The head alive, with or without a dead worker: the head refuses an id it never ran.
    for dead in ((), (len(names) - 1,)):
        proc, seconds = play(user, standin_cluster, "watch", dead=dead, aorta_run_id="never-ran")
        assert proc.returncode != 0
        assert len(lines_with(proc, f"no run never-ran was launched on {names[0]}: the node is free")) == 1
        assert seconds < TIMEOUT + 30, seconds
    # The head dead: nothing refuses on it, and no record of a run nobody confirmed is written.
    for dead in ((0,), range(len(names))):
        proc, seconds = play(user, standin_cluster, "watch", dead=dead, aorta_run_id="never-ran")
        assert proc.returncode != 0
        gone = [names[i] for i in dead]
        said = f"watch: run never-ran: no node that answered holds it ({len(gone)} of {len(names)} nodes not reached: "
        (line,) = lines_with(proc, said)
        assert f"not reached: {', '.join(gone)}); nothing recorded" in line
        assert seconds < TIMEOUT + 30, seconds
    after = records(user["root"])
    assert kept(before, after)
    added = {path.relative_to(user["root"]) for path in set(after) - set(before)}
    # Only the watch's own console log and variables; no run.json, report, junit.xml or history row.
    assert added <= {Path("never-ran/console.log"), Path("never-ran/variables.json")}, added


def test_trace_collect_of_an_unknown_id_or_of_dead_nodes_says_so_and_keeps_the_tree(user, standin_cluster):
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    proc, _seconds = play(user, standin_cluster, "trace_collect", aorta_run_id="never-collected")
    assert proc.returncode == 2
    said = f"trace_collect: no file of run never-collected on any of its {len(names)} nodes (0 not reached): check"
    assert len(lines_with(proc, said)) == 1, proc.stdout[-3000:]
    # The directory made for an id no node holds goes again: nothing is left for a run that never was.
    assert not (user["root"] / "never-collected").exists()
    # A recorded run's tree, collected again while every node is dead: kept byte for byte.
    where = recorded(user, "collected-run", tree=names[0])
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "trace_collect", dead=range(len(names)), aorta_run_id="collected-run")
    assert proc.returncode == 2
    tree = where / "combined_traces"
    said = lines_with(proc, f"trace_collect: {tree} kept as it was: 1 nodes whose files it holds")
    assert len(said) == 1, proc.stdout[-3000:]
    line = said[0]
    gone = ", ".join(names[1:])  # every node dead: the tree's node, then the others not reached
    said = f"were not collected now ({names[0]}: not reached, or their files gone from them); {len(names) - 1} more"
    assert f"{said} not reached now: {gone}; nothing written over it" in line
    assert seconds < TIMEOUT + 30, seconds
    after = records(user["root"])
    log = where / "console.log"  # the collection's own line is appended to the run's log, never over it
    assert after[log].startswith(before[log])
    assert kept({p: b for p, b in before.items() if p != log}, after)


@pytest.mark.parametrize("which", ["head", "worker"])
def test_trace_collect_with_one_node_dead_names_it_and_keeps_the_tree(user, standin_cluster, which):
    """A recorded run's tree, collected again with its head or one worker dead: the dead node named
    as not reached, the tree (which holds the head's files) kept byte for byte, the exit non-zero."""
    names = [n["mgmt_ip"] for n in standin_cluster.nodes]
    dead = 0 if which == "head" else len(names) - 1
    where = recorded(user, f"collected-{which}", tree=names[0])
    before = records(user["root"])
    proc, seconds = play(user, standin_cluster, "trace_collect", dead=(dead,), aorta_run_id=f"collected-{which}")
    assert proc.returncode == 2, proc.stdout[-3000:]
    said = [line for line in lines_with(proc, "trace_collect: ") if names[dead] in line]
    assert len(said) == 1 and " kept as it was: 1 nodes whose files it holds were not collected now " in said[0]
    if which == "worker":  # the head answered with none of the run's files: the worker named too
        assert (
            f"({names[0]}: not reached, or their files gone from them); 1 more not reached now: {names[dead]};"
            in said[0]
        )
    assert seconds < TIMEOUT + 45, seconds
    after = records(user["root"])
    log = where / "console.log"
    assert after[log].startswith(before[log])
    changed = [str(p) for p, b in before.items() if p != log and after.get(p) != b]
    assert changed == [], changed


def test_the_controller_only_playbooks_name_a_path_that_is_not_there(user, standin_cluster):
    missing = user["home"] / "no-such-dir"
    before = records(user["root"])
    report, _seconds = play(
        user, standin_cluster, "trace_report", aorta_traces_dir=str(missing), aorta_report_dir=str(missing / "out")
    )
    assert report.returncode == 2
    assert len(lines_with(report, f"aorta_traces_dir: {missing} is not a directory")) == 1
    history, _seconds = play(user, standin_cluster, "run_history", aorta_results_root=str(missing))
    assert history.returncode == 2
    assert len(lines_with(history, f"root: {missing} is not a directory of runs")) == 1
    assert records(user["root"]) == before and not missing.exists()
