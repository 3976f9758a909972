# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in cluster as a pytest fixture: started once per session (once per pytest-xdist
worker, each worker a cluster of its own), removed at the end."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import xmlschema
from junitparser import Failure, JUnitXml, Skipped

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "standin"))
# Each pytest-xdist worker (gw0, gw1, ...) drives a stand-in cluster of its own: its containers,
# networks, labels and build/standin-<worker>/ carry the worker's id (standin.py: instances).
# xdist sets PYTEST_XDIST_WORKER before this file is imported. (Set, not defaulted: an instance
# exported in the shell would put every worker on one cluster.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["AORTA_STANDIN_INSTANCE"] = os.environ["PYTEST_XDIST_WORKER"]

import standin  # noqa: E402  (lives beside the tests, not in a package)
import xdist_groups  # noqa: E402  (beside this file)
from installed import build_artifact  # noqa: E402  (beside this file)

# The hook that keeps an xdist_group's tests on one worker under pytest 9 (xdist_groups.py says why).
pytest_collection_modifyitems = xdist_groups.pytest_collection_modifyitems

BIN = Path(sys.executable).parent
STATUS_DIR = "/var/tmp/aorta-cluster"  # the stand-in's aorta_lease_dir (the default)
# Ansible as a user runs it from the checkout, with plain output the tests can read.
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")


class Cluster:
    """A running stand-in cluster and helpers to drive it the way a user would."""

    status_dir = STATUS_DIR

    def __init__(self, state: dict) -> None:
        self.state = state
        self.nodes = state["nodes"]
        self.cluster_json = standin.OUT / "cluster.json"
        self.vars_yml = standin.OUT / "vars.yml"

    def ansible(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return self._run("ansible", "-i", str(self.cluster_json), "-e", f"@{self.vars_yml}", *args, timeout=timeout)

    def _playbook_args(self, inventory: Path | None) -> list[str]:
        """aorta_multinode.yml on the stand-in's cluster file (or ``inventory``) with its vars."""
        return ["aorta_multinode.yml", "-i", str(inventory or self.cluster_json), "-e", f"@{self.vars_yml}"]

    def playbook(self, *args: str, inventory: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        return self._run("ansible-playbook", *self._playbook_args(inventory), *args, timeout=timeout)

    def cluster_file(self, tmp_path: Path, nodes: int, vpc_ip: dict | None = None) -> Path:
        """A cluster.json holding the first ``nodes`` nodes, with some vpc_ip values replaced."""
        data = json.loads(self.cluster_json.read_text())
        keys = list(data["node_dict"])[:nodes]
        data["node_dict"] = {
            k: dict(data["node_dict"][k], **({"vpc_ip": vpc_ip[k]} if k in (vpc_ip or {}) else {})) for k in keys
        }
        data["head_node_dict"] = {"mgmt_ip": keys[0]}
        path = tmp_path / f"{nodes}-{uuid.uuid4().hex[:6]}-cluster.json"
        path.write_text(json.dumps(data))
        return path

    def run(self, tmp_path: Path, inventory: Path | None = None, slow_link: bool = False, **extra_vars):
        """aorta_multinode.yml with ``extra_vars``; returns (process, run.json or None, results dir, seconds).
        Unless a test slowed a link on purpose (``slow_link``), the fabric sweep of every run must name
        no node: a healthy stand-in named slow is a false finding, whatever the test is about."""
        results = tmp_path / f"results-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        proc = self.playbook("-e", json.dumps({"aorta_results_dir": str(results), **extra_vars}), inventory=inventory)
        elapsed = time.monotonic() - started
        # Kept beside the results (pytest keeps the last runs' tmp_path): a failure seen once is a bug.
        (tmp_path / f"{results.name}.ansible.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        run_json = results / "run.json"
        record = json.loads(run_json.read_text()) if run_json.exists() else None
        if record is not None and not slow_link:
            sweep = record.get("fabric_sweep") or {}
            assert not sweep.get("slow"), f"a healthy stand-in run named a slow link: {sweep}"
        return proc, record, results, elapsed

    def start(
        self,
        tmp_path: Path,
        run_id: str,
        *extra_args: str,
        inventory: Path | None = None,
        environment: dict | None = None,
        **extra_vars,
    ):
        """ansible-playbook in its own session (so a kill reaches every fork and ssh), output to a
        file, with ``environment`` added to its own; returns (process, results dir, output file)."""
        results = tmp_path / f"results-{run_id}"
        out = tmp_path / f"{run_id}.out"
        argv = [
            str(BIN / "ansible-playbook"),
            *self._playbook_args(inventory),
            "-e",
            json.dumps({"aorta_results_dir": str(results), "aorta_run_id": run_id, **extra_vars}),
            *extra_args,
        ]
        with open(out, "w") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=dict(ENV, **(environment or {})),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return proc, results, out

    def node_status(self, index: int, run_id: str) -> dict | None:
        """The supervisor's status file of ``run_id`` on node ``index`` (None until it is there)."""
        out = self.node_exec(index, "cat", f"{STATUS_DIR}/runs/{run_id}.json", check=False)
        try:
            return json.loads(out)
        except ValueError:
            return None

    def workload_processes(self) -> list[str]:
        return [
            line
            for i in range(len(self.nodes))
            for line in self.node_exec(i, "ps", "-eo", "args").splitlines()
            if "torchrun" in line or "train.py" in line
        ]

    def containers_of(self, run_id: str, indexes=None) -> list[str]:
        return [
            c
            for i in (range(len(self.nodes)) if indexes is None else indexes)
            for c in self.node_exec(i, "docker", "ps", "-aq", "--filter", f"label=aorta.cluster.run={run_id}").split()
        ]

    def wait_until_training(self, indexes, run_id: str, proc, out: Path) -> None:
        """Until the supervisors of those nodes say running and every one of their ranks made a step."""
        for _attempt in range(240):
            statuses = [self.node_status(i, run_id) for i in indexes]
            if all(s and s["state"] == "running" and min(s["progress"].values() or [0]) > 0 for s in statuses):
                return
            assert proc.poll() is None, out.read_text()[-3000:]
            time.sleep(1)
        raise AssertionError("the ranks never started training: " + out.read_text()[-3000:])

    def run_with_fault(
        self, tmp_path: Path, run_id: str, inject, *, deadline: int, grace: int, wait_for=None, restore=None
    ):
        """A run that would train on past ``deadline``; ``inject()`` once the ranks of the nodes
        ``wait_for`` (default all) train. Returns (process, results dir, seconds from the fault to the
        playbook's end); ``restore()`` runs whatever happens."""
        proc, results, out = self.start(
            tmp_path,
            run_id,
            aorta_timeout_seconds=deadline,
            aorta_kill_grace_seconds=grace,
            aorta_training_overrides={"training.max_steps": 1000000},
        )
        try:
            self.wait_until_training(range(len(self.nodes)) if wait_for is None else wait_for, run_id, proc, out)
            inject()
            injected = time.monotonic()
            proc.wait(timeout=deadline + grace + 300)
            return proc, results, time.monotonic() - injected
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            if restore is not None:
                restore()

    def containers_left(self) -> list[str]:
        """Containers of any aorta run still on any node."""
        return [
            line
            for i in range(len(self.nodes))
            for line in self.node_exec(i, "docker", "ps", "-a", "--filter", "label=aorta.cluster.run", "-q").split()
        ]

    def collection_playbook(self, playbook: str, extra_vars: dict, timeout: float = 900) -> subprocess.CompletedProcess:
        """One of the collection's playbooks (``aorta.cluster.watch``, ``playbooks/stop.yml``...) on the
        stand-in's cluster file, with its vars and ``extra_vars``."""
        inventory = ["-i", str(self.cluster_json), "-e", f"@{self.vars_yml}"]
        return self._run("ansible-playbook", playbook, *inventory, "-e", json.dumps(extra_vars), timeout=timeout)

    def tool(self, tool: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Any of the venv's Ansible commands, run from the checkout as a user would."""
        return self._run(tool, *args, timeout=timeout)

    def _run(self, tool: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / tool), *args], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout, check=False
        )

    def node_exec(self, index: int, *argv: str, check: bool = True) -> str:
        result = subprocess.run(
            ["docker", "exec", self.nodes[index]["container"], *argv], capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{argv} on node {index}: {result.stderr}")
        return result.stdout


# Whole-machine tests (marker ``whole_machine``: a throttled link measured against the others, the
# execution environment's build and job, headless Chromium) run with no test of another worker
# beside them; every other test shares the machine with the other workers' tests. A readers-writer
# lock over two files that every worker opens: a whole-machine test takes the turnstile and then
# the machine alone; any other test passes the turnstile (so it waits while a whole-machine test
# waits or runs: that one is not starved) and then shares the machine.
MACHINE_LOCKS = REPO / "build" / "pytest-locks"


@contextlib.contextmanager
def machine_share(whole: bool):
    """Never nested in one process: a shared hold inside a shared hold would wait behind a whole
    one waiting at the turnstile, which waits for the outer hold (fixtures of wider scope take it
    before a test's own, never inside it)."""
    MACHINE_LOCKS.mkdir(parents=True, exist_ok=True)
    with (
        open(MACHINE_LOCKS / "turnstile", "w", encoding="utf-8") as turnstile,
        open(MACHINE_LOCKS / "machine", "w", encoding="utf-8") as machine,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if not whole:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(machine, fcntl.LOCK_EX if whole else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _machine_share(request):
    with machine_share(request.node.get_closest_marker("whole_machine") is not None):
        yield


def leftovers() -> list[str]:
    found = []
    for kind in ("ps", "network ls"):
        out = subprocess.run(
            ["docker", *kind.split(), "-q", "--filter", f"label={standin.LABEL}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        found += [f"{kind}:{item}" for item in out]
    return found


@pytest.fixture(scope="session")
def standin_cluster():
    # Three nodes: runs on 3 use them all, runs on 2 use a cluster file listing the first two.
    # Starting and removing them shares the machine like a test (not beside a whole_machine one).
    with machine_share(whole=False):
        state = standin.up(int(os.environ.get("AORTA_STANDIN_NODES", "3")))
    yield Cluster(state)
    with machine_share(whole=False):
        standin.down()
    left = leftovers()
    assert not left, f"stand-in down left {left}"
    assert not standin.OUT.exists()
    images = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}"], capture_output=True, text=True, check=True
    ).stdout.split()
    # Only the caches: the stand-in's images and `make ee`'s (whose build, on another worker, may
    # still hold its untagged stages).
    allowed = {"aorta-standin-node", "aorta-standin-workload", "aorta-ee-base", "aorta-cluster-ee", "<none>"}
    assert set(images) <= allowed, images


# What a workload must receive byte for byte, and no shell may run (test_multinode_launch.py).
NASTY = "$(touch pwned) `touch pwned2`; touch pwned3 'q' \"dq\""
# An earlier run's trace (test_collect.py plants it where the collection must not take it).
OLD_TRACE = json.dumps({"distributedInfo": {"rank": 99, "world_size": 100}, "traceEvents": []})


def plant(cluster, index, path, content, days_old):
    cluster.node_exec(index, "mkdir", "-p", path.rsplit("/", 1)[0])
    cluster.node_exec(index, "sh", "-c", 'printf %s "$1" > "$2"', "plant", content, path)
    if days_old:
        cluster.node_exec(index, "touch", "-d", f"{days_old} days ago", path)


class HealthyRun:
    """One healthy run on every node of a worker's cluster, shared by the tests that assert on it."""

    def __init__(self, proc, run, results, run_id, planted):
        self.proc, self.run, self.results, self.run_id = proc, run, results, run_id
        self.planted = planted  # node paths of the earlier runs' traces planted before it


@pytest.fixture(scope="session")
def healthy_run(standin_cluster, tmp_path_factory):
    """A healthy run on every node, made once and asserted on by several tests, each its own test
    (mark each ``@pytest.mark.xdist_group("healthy_run")``: one worker runs them all, so the run
    is made once per session). What each test needs of it: the nasty override value and its echo
    (test_multinode_launch: the happy path), an earlier run's trace in this run's own directory
    and a fresh one of another run elsewhere under aorta_path (test_collect: neither is
    collected)."""
    run_id = f"healthy-{uuid.uuid4().hex[:6]}"
    planted = [f"/root/aorta/aorta_runs/{run_id}/torch_profiler/rank99/old.json"]
    with machine_share(whole=False):
        for i in range(len(standin_cluster.nodes)):
            plant(standin_cluster, i, planted[0], OLD_TRACE, 2)
            plant(standin_cluster, i, "/root/aorta/artifacts/other/torch_profiler/rank98/trace.json", OLD_TRACE, 0)
        proc, run, results, _elapsed = standin_cluster.run(
            tmp_path_factory.mktemp("healthy-run"),
            aorta_run_id=run_id,
            aorta_training_overrides={"standin.echo_overrides": True, "standin.note": NASTY},
        )
    return HealthyRun(proc, run, results, run_id, planted)


# Six profiled steps of 50 ms compute (8 steps; wait 1, warmup 1): the straggler test needs 4 steps
# to name one of 4 ranks at 5%, and 5 ms steps on two shared cores are noise.
STRAGGLER_PROFILE = {
    "training.max_steps": 8,
    "profiling.wait": 1,
    "profiling.warmup": 1,
    "profiling.active": 8,
    "standin.compute_ms": 50,
}
SERIES_RUNS = 10


class HealthySeries:
    """Ten healthy runs in a row on the first two nodes, into one results root: ``runs`` holds each
    one's (process, run.json, results dir, seconds), ``seconds`` all of them."""

    def __init__(self, root: Path, inventory: Path, runs: list, seconds: float):
        self.root, self.inventory, self.runs, self.seconds = root, inventory, runs, seconds


@pytest.fixture(scope="session")
def healthy_series(standin_cluster, tmp_path_factory):
    """Made once, asserted on by two tests (mark each ``@pytest.mark.xdist_group("healthy_series")``):
    test_faults' ten healthy runs in a row (each completes with a whole tree, none names a
    straggler) and test_insight's healthy runs and baselines (the second run compared with the
    first within 15%; the last with a threshold it cannot meet, which fails its verdict, and is
    then the newest healthy run aorta_baseline auto must find). Each run shares the machine as a
    test does, and lets go of it between runs."""
    root = tmp_path_factory.mktemp("healthy-series")
    inventory = standin_cluster.cluster_file(root, 2)
    runs: list = []
    started = time.monotonic()
    for index in range(SERIES_RUNS):
        extra: dict = {}
        if index == 1:
            # Two healthy runs on this shared 2-core machine differed by 10.6% in step time once
            # (57.8 vs 64.0 ms, both run alone), beyond the 2-sigma noise of their own steps: the
            # verdict sees each run's step-to-step spread, not the machine's run-to-run drift.
            extra = {"aorta_baseline": str(runs[0][2]), "aorta_baseline_tolerance": 0.15}
        if index == SERIES_RUNS - 1:
            extra = {"aorta_expected_results": {"max_avg_iteration_ms": 1}}
        with machine_share(whole=False):
            runs.append(
                standin_cluster.run(root, inventory=inventory, aorta_training_overrides=STRAGGLER_PROFILE, **extra)
            )
    return HealthySeries(root, inventory, runs, time.monotonic() - started)


def read_junit(results: Path) -> dict[str, tuple[str, str]]:
    """``{"classname: name": (outcome, message)}`` of a run's junit.xml (outcome '', 'failure' or
    'skipped'), which must be valid against the published JUnit schema the tests vendor and be read
    by a JUnit reader (junitparser)."""
    text = (results / "junit.xml").read_text()
    xmlschema.XMLSchema(str(REPO / "tests" / "fixtures" / "junit" / "junit-10.xsd")).validate(text)
    (suite,) = list(JUnitXml.fromstring(text))
    found = {}
    for case in suite:
        outcome, message = "", ""
        for result in case.result:
            if isinstance(result, (Failure, Skipped)):
                outcome = "failure" if isinstance(result, Failure) else "skipped"
                message = result.message or ""
        found[f"{case.classname}: {case.name}"] = (outcome, message)
    return found


# The table `make faults` prints: one row per fault case, added by the case before it asserts.
FAULT_ROWS: list[dict] = []


@pytest.fixture(scope="session")
def fault_table():
    return FAULT_ROWS


def pytest_sessionfinish(session):
    # An xdist worker hands its rows to the controller, which prints the table.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_rows"] = json.dumps(FAULT_ROWS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    FAULT_ROWS.extend(json.loads(getattr(node, "workeroutput", {}).get("fault_rows", "[]")))


def pytest_terminal_summary(terminalreporter):
    if not FAULT_ROWS:
        return
    columns = ("fault", "expected", "got", "seconds", "left on nodes")
    rows = [[str(r.get(c, "")) for c in columns] for r in FAULT_ROWS]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    terminalreporter.section("fault matrix")
    for line in [list(columns), ["-" * w for w in widths], *rows]:
        terminalreporter.write_line("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())


@pytest.fixture(scope="session")
def artifact(tmp_path_factory) -> Path:
    """The collection's artifact, built once per worker (installed.build_artifact checks what is in it)."""
    return build_artifact(tmp_path_factory.mktemp("dist"))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())
