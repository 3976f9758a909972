# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role is a step a user can run in a playbook of their own, with the installed collection,
from outside the checkout: trace_parse on a folder of traces, preflight to hold the nodes for a run,
and teardown to free them again by the run's id. A role that needs an earlier step's value refuses
in one line naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import standin  # tests/standin, put on sys.path by conftest

# artifact: test_packaging's fixture, built once for this module too.
from installed import outside_env, run

REPO = Path(__file__).resolve().parents[2]
LEASE = "/var/tmp/aorta-cluster/node.lease"  # aorta_lease_dir's default, node_lease's file

# A user's own playbook: the report on a folder, then the nodes held for a run (the run_context
# and preflight roles), nothing launched.
HOLD = """\
- name: Report on my traces
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Analyse a folder of traces
      ansible.builtin.include_role:
        name: aorta.cluster.trace_parse
      vars:
        aorta_traces_dir: "{{ traces }}"
        aorta_report_dir: "{{ report }}"

- name: Fix the run
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Fix the run id and results directory
      ansible.builtin.include_role:
        name: aorta.cluster.run_context

- name: Check the nodes and hold them for the run
  hosts: aorta_nodes
  gather_facts: false
  vars:
    aorta_run_id_resolved: "{{ hostvars['localhost']['aorta_run_id_resolved'] }}"
    aorta_results_dir_resolved: "{{ hostvars['localhost']['aorta_results_dir_resolved'] }}"
  tasks:
    - name: Probe every node
      ansible.builtin.include_role:
        name: aorta.cluster.preflight
"""

# Later, from another ansible-playbook: the nodes freed by the run's id alone.
FREE = """\
- name: Free the nodes a run holds
  hosts: aorta_nodes
  gather_facts: false
  tasks:
    - name: Remove the run's containers and release each node
      ansible.builtin.include_role:
        name: aorta.cluster.teardown
      vars:
        aorta_run_id_resolved: "{{ run_id }}"
"""

NEEDS = """\
- name: Free the nodes without saying which run
  hosts: aorta_nodes
  gather_facts: false
  tasks:
    - name: Remove the run's containers and release each node
      ansible.builtin.include_role:
        name: aorta.cluster.teardown
"""


def _leases(cluster, nodes: int) -> list[str]:
    """The run id each node's lease names ("" where none)."""
    found = []
    for index in range(nodes):
        text = cluster.node_exec(index, "cat", LEASE, check=False)
        found.append(json.loads(text).get("run_id", "") if text.strip() else "")
    return found


@pytest.mark.standin
def test_a_users_playbook_runs_trace_parse_on_a_folder_and_teardown_by_run_id(
    artifact,
    standin_cluster,
    tmp_path,
):
    fresh = tmp_path / "collections"
    env = outside_env(tmp_path, fresh)
    install = ["ansible-galaxy", "collection", "install", "--offline", "-p", str(fresh), str(artifact)]
    installed = run(install, tmp_path, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    traces, report = tmp_path / "traces", tmp_path / "report"
    traces.mkdir()
    shutil.copy(REPO / "tests/fixtures/traces/mi300/bert-small.json.gz", traces / "trace.json.gz")
    cluster = standin_cluster.cluster_file(tmp_path, 2)
    source = tmp_path / "cluster.aorta.yml"
    source.write_text(f"plugin: aorta.cluster.cluster_json\npath: {cluster}\n")
    common = ["-i", str(source), "-e", f"@{standin.OUT / 'vars.yml'}", "-e", f"aorta_results_root={tmp_path / 'r'}"]
    run_id = "20261206T050000-roles1"

    (tmp_path / "hold.yml").write_text(HOLD)
    held = run(
        ["ansible-playbook", "hold.yml", *common, "-e", f"traces={traces} report={report} aorta_run_id={run_id}"],
        tmp_path,
        env,
    )
    assert held.returncode == 0, held.stdout[-3000:] + held.stderr[-2000:]
    parsed = json.loads((report / "aorta_benchmark_report.json").read_text())
    assert parsed["per_rank_summary"][0]["gpu_timeline"]["total_time"] > 0
    assert _leases(standin_cluster, 2) == [run_id, run_id]

    (tmp_path / "needs.yml").write_text(NEEDS)
    refused = run(["ansible-playbook", "needs.yml", *common], tmp_path, env)
    assert refused.returncode != 0
    assert "aorta_run_id_resolved" in refused.stdout + refused.stderr
    assert _leases(standin_cluster, 2) == [run_id, run_id]

    (tmp_path / "free.yml").write_text(FREE)
    freed = run(["ansible-playbook", "free.yml", *common, "-e", f"run_id={run_id}"], tmp_path, env)
    assert freed.returncode == 0, freed.stdout[-3000:] + freed.stderr[-2000:]
    assert _leases(standin_cluster, 2) == ["", ""]
    assert standin_cluster.containers_left() == []
