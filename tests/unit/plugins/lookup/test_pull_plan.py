# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pull_plan lookup: the run's manifest and report read from its results directory, the plan
computed by _collect_plan.pull_plan, the budget and sample count from the play's variables."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar

from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan


def query(*terms, **variables):
    templar = Templar(loader=DataLoader(), variables={})
    lookup = lookup_loader.get("aorta.cluster.pull_plan", loader=DataLoader(), templar=templar)
    return lookup.run(list(terms), variables=variables)


def results(tmp_path, count=6, size=1000, report=None):
    """A sampled run's results directory: the head collected, the others on their nodes."""
    nodes = []
    for rank in range(count):
        row = {"rank": rank, "name": f"n{rank}", "mgmt_ip": f"10.0.0.{rank}", "collected": rank == 0, "files": []}
        if rank:
            row |= {"on_node": {"root": "/a/out", "since": 1.0}, "files": [{"path": "t.json", "size": size}]}
        nodes.append(row)
    (tmp_path / "combined_traces").mkdir()
    manifest = {"run_id": "20261206T000000-abcdef", "nodes": nodes}
    (tmp_path / "combined_traces" / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "aorta_benchmark_report.json").write_text(json.dumps(report or {}))
    return str(tmp_path)


def test_after_the_report_the_named_node_its_next_and_a_sample_seeded_from_the_run_id(tmp_path):
    where = results(tmp_path, report={"stragglers": [{"node": "10.0.0.3"}]})
    got = query(aorta_results_dir_resolved=where, aorta_collect_sample_nodes=1, aorta_collect_budget_gb=1)
    seed = _collect_plan.seed_of("20261206T000000-abcdef")
    assert [(item["node"], item["why"]) for item in got[:2]] == [
        ("n3", "named by the analysis"),
        ("n4", "the next node after n3"),
    ]
    assert len(got) == 3 and got[2]["why"] == f"drawn at random (seed {seed})"
    # The defaults (2 more, 50 GB) where the play has none of the variables.
    assert len(query(aorta_results_dir_resolved=where)) == 4


def test_the_report_is_read_where_aorta_report_dir_put_it(tmp_path):
    where = results(tmp_path)
    elsewhere = tmp_path / "report"
    elsewhere.mkdir()
    (elsewhere / "aorta_benchmark_report.json").write_text(json.dumps({"slow_nodes": [{"node": "n2"}]}))
    got = query(aorta_results_dir_resolved=where, aorta_report_dir=str(elsewhere), aorta_collect_sample_nodes=0)
    assert [item["node"] for item in got] == ["n2", "n3"]


def test_the_budget_counts_the_listed_sizes(tmp_path):
    where = results(tmp_path, size=600_000_000, report={"slow_nodes": [{"node": "n1"}]})
    got = query(aorta_results_dir_resolved=where, aorta_collect_sample_nodes=0, aorta_collect_budget_gb="1")
    assert [item["node"] for item in got] == ["n1"]  # n2, the next, would pass 1 GB


def test_nodes_asked_by_name_or_rank_and_nothing_without_a_manifest(tmp_path):
    where = results(tmp_path)
    assert [item["node"] for item in query("n2", "5", aorta_results_dir_resolved=where)] == ["n2", "n5"]
    with pytest.raises(AnsibleLookupError, match=r"^aorta_collect_nodes: not pulled: gone \(not a node of this run"):
        query("n2", "gone", aorta_results_dir_resolved=where)
    assert query(aorta_results_dir_resolved=str(tmp_path / "elsewhere")) == []
    with pytest.raises(AnsibleLookupError, match="aorta_results_dir_resolved is not set"):
        query()
