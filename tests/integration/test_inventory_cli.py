# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory plugin the way users meet it: ansible-inventory and ansible-playbook processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run(repo, *args, cwd=None, env=None):
    full_env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", **(env or {}))
    if cwd is None:  # from the collection root, as the README tells users
        full_env["ANSIBLE_CONFIG"] = str(repo / "ansible.cfg")
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=cwd or repo,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def multinode(repo, *inventories, extra=(), playbook="aorta_multinode.yml"):
    """ansible-playbook from the collection root with -i for each inventory and -e for each extra."""
    argv = ["ansible-playbook", playbook]
    for inventory in inventories:
        argv += ["-i", str(inventory)]
    for value in extra:
        argv += ["-e", value]
    return run(repo, *argv)


def unwrap(value):
    """ansible-inventory marks data-file values as {"__ansible_unsafe": ...}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def test_graph_shows_the_groups_in_node_dict_order(repo):
    result = run(repo, "ansible-inventory", "-i", "inventories/example/cluster.json", "--graph")
    assert result.returncode == 0, result.stderr
    lines = [line.strip(" |-") for line in result.stdout.splitlines()]
    order = ["mi300x-r01-n01.mgmt.example", "mi300x-r01-n02.mgmt.example", "mi300x-r02-n01.mgmt.example"]
    nodes_at = lines.index("@aorta_nodes:")
    assert lines[nodes_at + 1 : nodes_at + 4] == order
    head_at = lines.index("@aorta_head:")
    assert lines[head_at + 1] == order[0]
    workers_at = lines.index("@aorta_workers:")
    assert lines[workers_at + 1 : workers_at + 3] == order[1:]


def test_list_shows_host_vars_in_node_dict_order(repo):
    result = run(repo, "ansible-inventory", "-i", "inventories/example/cluster.json", "--list")
    assert result.returncode == 0, result.stderr
    data = unwrap(json.loads(result.stdout))
    assert data["aorta_nodes"]["hosts"] == [
        "mi300x-r01-n01.mgmt.example",
        "mi300x-r01-n02.mgmt.example",
        "mi300x-r02-n01.mgmt.example",
    ]
    hostvars = data["_meta"]["hostvars"]
    assert [hostvars[h]["aorta_node_rank"] for h in data["aorta_nodes"]["hosts"]] == [0, 1, 2]
    head = hostvars["mi300x-r01-n01.mgmt.example"]
    assert head["aorta_vpc_ip"] == "10.224.0.11"
    assert head["ansible_host"] == "mi300x-r01-n01.mgmt.example"
    assert head["ansible_user"]  # {user-id} resolved to the controller's user
    assert "{user-id}" not in head["ansible_ssh_private_key_file"]


def test_yaml_source_file_gives_the_same_hosts(repo):
    result = run(repo, "ansible-inventory", "-i", "inventories/example/aorta.cluster_json.yml", "--list")
    assert result.returncode == 0, result.stderr
    assert len(unwrap(json.loads(result.stdout))["aorta_nodes"]["hosts"]) == 3


@pytest.mark.parametrize(
    "name,key",
    [
        ("cluster.json", "node_dict.{xx.xx.xx.xx|hostname}"),
        ("cluster_container.json", "node_dict.{xx.xx.xx.xx|hostname-1}"),
        ("atom_cluster.json", "node_dict.{head-node-ip}"),
        ("cluster_rack.json", "head_node_dict.mgmt_ip"),
    ],
)
def test_cvs_templates_fail_naming_file_and_key(repo, fixtures_dir, name, key):
    path = fixtures_dir / "cluster_files" / "cvs-templates" / name
    result = run(repo, "ansible-inventory", "-i", str(path), "--list")
    assert result.returncode != 0
    # One line naming file and key, nothing else: no other plugin's try, no warning block.
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{path}: {key}: ")
    assert result.stdout == ""
    played = run(repo, "ansible-playbook", "aorta_multinode.yml", "-i", str(path))
    assert played.returncode != 0
    assert played.stderr.splitlines() == [line] and played.stdout == ""


@pytest.mark.parametrize("name", ["cluster.json", "cluster_container.json", "atom_cluster.json", "cluster_rack.json"])
def test_filled_cvs_files_are_accepted_without_leaking_switch_passwords(repo, fixtures_dir, name):
    path = fixtures_dir / "cluster_files" / "filled" / name
    result = run(repo, "ansible-inventory", "-i", str(path), "--list")
    assert result.returncode == 0, result.stderr
    data = unwrap(json.loads(result.stdout))
    assert data["aorta_nodes"]["hosts"]
    assert "switch_ssh_password" not in result.stdout


def test_truncated_cluster_file_fails_with_the_plugins_message(repo, tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text((repo / "inventories/example/cluster.json").read_text()[:300])
    result = run(repo, "ansible-inventory", "-i", str(path), "--list")
    assert result.returncode != 0
    assert f"{path}: not valid JSON at line" in result.stderr


def test_a_node_without_vpc_ip_beside_nodes_with_one_is_refused_naming_it(repo, tmp_path):
    """The node would get its management address as its fabric address: refused before any play,
    one line naming the file, the key and the node; with no vpc_ip at all, accepted with one warning."""
    nodes = {"10.0.0.1": {"vpc_ip": "10.1.0.1"}, "10.0.0.2": {}, "10.0.0.3": {"vpc_ip": "10.1.0.3"}}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": nodes}))
    result = run(repo, "ansible-playbook", "aorta_multinode.yml", "-i", str(path))
    assert result.returncode != 0 and "PLAY [" not in result.stdout
    said = [line for line in (result.stdout + result.stderr).splitlines() if "vpc_ip missing on" in line]
    assert len(said) == 1 and f"{path}: node_dict: vpc_ip missing on 10.0.0.2" in said[0], said
    assert len(said[0]) < 300
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {"10.0.0.1": {}, "10.0.0.2": {}}}))
    listed = run(repo, "ansible-inventory", "-i", str(none), "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.count("no node has a vpc_ip") == 1, listed.stderr


def test_playbook_stops_when_another_plugin_read_the_cluster_file(repo, tmp_path):
    # An ansible.cfg of someone else's (default enable_plugins), the collection installed: yaml
    # "parses" the file to no hosts, and the guard says so before any node play.
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\ncollections_path = {repo / '.collections'}\n")
    result = run(
        repo,
        "ansible-playbook",
        str(repo / "aorta_multinode.yml"),
        "-i",
        str(repo / "inventories/example/cluster.json"),
        cwd=tmp_path,
        env={"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")},
    )
    assert result.returncode != 0
    assert "was not read by aorta.cluster.cluster_json" in result.stdout
    assert "read by the builtin yaml plugin" in result.stdout
    # Without the collection on the path at all, Ansible itself names the collection's step it
    # cannot find, before any play runs (the node steps are action plugins the plays name).
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    result = run(
        repo,
        "ansible-playbook",
        str(repo / "aorta_multinode.yml"),
        "-i",
        str(repo / "inventories/example/cluster.json"),
        cwd=tmp_path,
        env={"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")},
    )
    assert result.returncode != 0
    assert "aorta.cluster." in result.stdout + result.stderr
    assert "PLAY [" not in result.stdout


def test_playbook_with_a_bad_cluster_file_fails_before_any_play(repo, tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {}}))
    result = run(repo, "ansible-playbook", "aorta_multinode.yml", "-i", str(path))
    assert result.returncode != 0
    assert f"{path}: node_dict: is empty" in result.stdout + result.stderr
    assert "PLAY [" not in result.stdout


@pytest.mark.parametrize(
    "unlinked,exposed_comm",
    [("false", 35.28311), ("true", 55.37122)],  # TraceLens' figures, default and --include_unlinked_kernels
)
def test_trace_report_playbook_on_a_plain_folder_in_both_counting_modes(
    repo, fixtures_dir, tmp_path, unlinked, exposed_comm
):
    traces = fixtures_dir / "traces"
    out = tmp_path / "report"
    result = run(
        repo,
        "ansible-playbook",
        "trace_report.yml",
        "-e",
        f"aorta_traces_dir={traces}",
        "-e",
        f"aorta_report_dir={out}",
        "-e",
        f"aorta_include_unlinked_kernels={unlinked}",
    )
    # A folder of unrelated runs' traces: CVS's variance threshold fails, and (aorta_fail_on_threshold,
    # default true as in CVS) the playbook exits non-zero after writing the whole report.
    assert result.returncode != 0 and "verdict" not in result.stderr, result.stdout[-2000:]
    assert "thresholds not met: max_time_variance_ratio" in result.stdout, result.stdout[-2000:]
    report = json.loads((out / "aorta_benchmark_report.json").read_text())
    assert report["verdict"]["verdict"] == "FAIL"
    for entry in report["per_rank_summary"]:
        assert {"rank", "node", "file", "gpu_timeline"} <= set(entry)
    resnet = next(r for r in report["per_rank_summary"] if r["file"] == "mi300/resnet-act-checkpoint.json.gz")
    assert resnet["gpu_timeline"]["exposed_comm_time"] == pytest.approx(exposed_comm, rel=1e-3)
    assert (out / "report.html").exists() and (out / "per_rank.csv").exists()


def test_a_limit_or_an_awx_slice_of_2_of_3_nodes_stops_before_any_node_is_touched(repo, tmp_path):
    """AWX's job variables carry no slice count: what a slice sees is 2 of the file's 3 nodes, as a
    --limit does. Both are refused with the same line, before preflight."""
    limited = run(
        repo,
        "ansible-playbook",
        "aorta_multinode.yml",
        "-i",
        "inventories/example/cluster.json",
        "--limit",
        "mi300x-r01-n01.mgmt.example,mi300x-r01-n02.mgmt.example",
    )
    # A slice's inventory: AWX keeps the group's variables and only the slice's hosts.
    listed = json.loads(run(repo, "ansible-inventory", "-i", "inventories/example/cluster.json", "--list").stdout)
    hosts = listed["aorta_nodes"]["hosts"][:2]
    slice_inventory = {
        "all": {
            "children": {
                "aorta_nodes": {
                    "hosts": {h: unwrap(listed["_meta"]["hostvars"][h]) for h in hosts},
                    "vars": {"aorta_cluster_nodes": 3},
                },
                "aorta_head": {"hosts": {hosts[0]: {}}},
                "aorta_workers": {"hosts": {hosts[1]: {}}},
            }
        }
    }
    (tmp_path / "slice.yml").write_text(json.dumps(slice_inventory))
    sliced = multinode(repo, tmp_path / "slice.yml")
    for result in (limited, sliced):
        assert result.returncode != 0
        assert "2 of 3 nodes: a --limit or an AWX sliced job." in result.stdout, result.stdout[-2000:]
        assert "Job Slicing to 1" in result.stdout
        assert "Reach every node" not in result.stdout
        assert "ranks" not in result.stdout.split("2 of 3 nodes")[1].split("\n")[0]


def test_two_cluster_files_in_one_inventory_are_refused(repo, tmp_path):
    other = json.loads((repo / "inventories/example/cluster.json").read_text())
    other["node_dict"] = {
        f"other-{k}": dict(v, vpc_ip=f"10.99.0.{i}") for i, (k, v) in enumerate(other["node_dict"].items())
    }
    other["head_node_dict"] = {"mgmt_ip": next(iter(other["node_dict"]))}
    (tmp_path / "second-cluster.json").write_text(json.dumps(other))
    result = multinode(repo, "inventories/example/cluster.json", tmp_path / "second-cluster.json")
    assert result.returncode != 0
    assert "expected one head with rank 0 and ranks 0..5 once each" in result.stdout
    assert "Fix the run id" not in result.stdout


def test_cluster_file_as_extra_variable(repo, tmp_path):
    """The AWX survey route: the inventory holds no nodes, aorta_cluster_file names the file."""
    local = f"ansible_python_interpreter={sys.executable}"
    result = multinode(
        repo,
        "localhost,",
        playbook="playbooks/inventory_guard.yml",
        extra=["aorta_cluster_file=inventories/example/cluster.json", "aorta_cluster_connection_vars=false", local],
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "inventories/example/cluster.json: 3 nodes, head mi300x-r01-n01.mgmt.example" in result.stdout
    # A broken file: one line naming the file and the key, before any node play.
    bad = tmp_path / "cluster.json"
    bad.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {"a": {"vpc_ip": "<changeme>"}}}))
    result = multinode(repo, "localhost,", extra=[f"aorta_cluster_file={bad}", local])
    assert result.returncode != 0
    assert f"{bad}: node_dict.a.vpc_ip: contains <changeme>" in result.stdout
    # Nodes from the inventory AND the extra variable: refused.
    result = multinode(
        repo, "inventories/example/cluster.json", extra=["aorta_cluster_file=inventories/example/cluster.json"]
    )
    assert result.returncode != 0
    assert "Use one source of nodes" in result.stdout


@pytest.mark.parametrize(
    "extra,line",
    [
        ({"aorta_output_dir": "../../etc"}, "aorta_output_dir: '../../etc' must stay under aorta_path"),
        ({"aorta_timeout_seconds": -5}, "aorta_timeout_seconds: -5 must be at least 1"),
        ({"aorta_master_port": 70000}, "aorta_master_port: 70000 must be a TCP port from 1024 to 65535"),
        ({"aorta_nproc_per_node": 0}, "aorta_nproc_per_node: 0 must be at least 1"),
        ({"aorta_collect_parallel": 0}, "aorta_collect_parallel: 0 must be at least 1"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it_and_nothing_reaches_a_node(repo, tmp_path, extra, line):
    """The example cluster's nodes do not exist: any attempt to reach one would show as unreachable."""
    result = multinode(
        repo,
        "inventories/example/cluster.json",
        extra=[json.dumps({**extra, "aorta_results_dir": str(tmp_path / "results")})],
    )
    assert result.returncode != 0
    assert line in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert "UNREACHABLE" not in result.stdout and "Launch Aorta on every node" not in result.stdout


def test_a_misspelt_variable_stops_the_playbook_before_any_node_is_contacted(repo, tmp_path):
    """As an extra var and as a node's host var (host_vars/ beside the cluster file): the first
    plays name it and the variable meant; preflight never starts, so no node is contacted (the
    example cluster's nodes do not exist: reaching one would show as unreachable)."""
    cluster = tmp_path / "cluster.json"
    cluster.write_text((repo / "inventories/example/cluster.json").read_text())
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "mi300x-r01-n02.mgmt.example.yml").write_text("aorta_gpus_per_nod: 4\n")
    started = time.monotonic()
    result = multinode(repo, cluster, extra=["aorta_timout_seconds=60"])
    elapsed = time.monotonic() - started
    assert result.returncode != 0 and elapsed < 60
    assert "aorta_timout_seconds (extra vars) is not a variable of aorta.cluster; did you mean" in result.stdout
    assert "aorta_gpus_per_nod (host or group vars of mi300x-r01-n02.mgmt.example)" in result.stdout
    assert "did you mean aorta_gpus_per_node?" in result.stdout
    assert "Reach every node" not in result.stdout and "unreachable=1" not in result.stdout


def test_trace_collect_with_a_limit_says_in_one_line_how_to_pick_nodes(repo, fixtures_dir):
    """--limit NODE leaves localhost out, and with it the play that fixes the run: the playbook
    refuses in one line naming the node and what picks nodes here, before anything connects (the
    fixture's nodes do not exist), instead of an undefined hostvars error."""
    cluster = fixtures_dir / "cluster_files" / "filled" / "atom_cluster.json"
    node = list(json.loads(cluster.read_text())["node_dict"])[1]
    limited = run(
        repo,
        "ansible-playbook",
        "playbooks/trace_collect.yml",
        "-i",
        str(cluster),
        "-e",
        "aorta_run_id=some-run",
        "--limit",
        node,
    )
    assert limited.returncode == 2, limited.stdout[-2000:]
    (line,) = [x for x in limited.stdout.splitlines() if x.startswith(f"fatal: [{node}]")]
    msg = json.loads(line.split(" => ", 1)[1])["msg"]
    assert msg == (
        "trace_collect: --limit left out localhost, where the run is fixed; to collect some nodes pass "
        f'-e \'{{"aorta_collect_nodes": ["{node}"]}}\' (names or node ranks) without --limit, or add localhost '
        f"to it (--limit '{node},localhost')"
    )
    assert "HostVarsVars" not in limited.stdout + limited.stderr
