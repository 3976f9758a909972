# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""campaign_run's own parts: its settings checked (one line naming the variable), each group's
cluster file (the campaign's less the other nodes, 0600, beside the same group_vars), what a group
that left no run.json counts as, and the task in a play (refusals; --check runs nothing)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.action import campaign_run
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _variables

FILLED = Path(__file__).resolve().parents[3] / "fixtures" / "cluster_files" / "filled" / "cluster.json"


def test_the_defaults_are_checked_into_their_values():
    assert campaign_run.checked({"aorta_scaling_sizes": [], "aorta_scaling_seed": ""}) == {
        "aorta_scaling_sizes": None,
        "aorta_scaling_seed": None,
        "aorta_scaling_exclude": True,
        "aorta_scaling_opening": True,
        "aorta_scaling_min_efficiency": None,
        "aorta_scaling_parallel": 16,
    }


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("aorta_scaling_sizes", "1,2", "must be a list of group sizes"),
        ("aorta_scaling_sizes", [2, 0], "must be a list of group sizes"),
        ("aorta_scaling_seed", -1, "must be at least 0"),
        ("aorta_scaling_seed", True, "is not a whole number"),
        ("aorta_scaling_min_efficiency", 1.5, "must be a fraction above 0 and at most 1"),
        ("aorta_scaling_parallel", 0, "must be at least 1"),
        ("aorta_scaling_exclude", "maybe", "must be true or false"),
        ("aorta_scaling_opening", 1, "must be true or false"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(name, value, said):
    with pytest.raises(ValueError) as found:
        campaign_run.checked({name: value})
    assert str(found.value).startswith(f"{name}: {value!r} ") and said in str(found.value)


def test_a_groups_cluster_file_holds_its_nodes_only(tmp_path):
    source_dir = tmp_path / "site"
    (source_dir / "group_vars").mkdir(parents=True)
    source = source_dir / "cluster.json"
    shutil.copy(FILLED, source)
    nodes = list(json.loads(source.read_text())["node_dict"])
    rung = tmp_path / "k2"
    rung.mkdir()
    options = {"connection_vars": False}
    inventory, cluster = campaign_run.group_inventory(
        str(source), nodes, [nodes[2], nodes[0]], str(rung / "g0"), options
    )
    written = json.loads(Path(cluster).read_text())
    assert list(written["node_dict"]) == [nodes[0], nodes[2]]  # the file's order: ranks follow it
    assert os.stat(cluster).st_mode & 0o777 == 0o600  # it may hold the SSH password
    # A YAML source names it: the plugin reads it wherever ansible.cfg does not enable it for .json.
    assert yaml.safe_load(Path(inventory).read_text()) == {
        "plugin": "aorta.cluster.cluster_json",
        "path": cluster,
        "connection_vars": False,
    }
    assert os.readlink(rung / "group_vars") == str(source_dir / "group_vars")
    assert not (rung / "host_vars").exists()  # the campaign's file has none


def test_the_campaigns_yaml_source_options_are_repeated(tmp_path):
    own = tmp_path / "cluster.aorta.yml"
    own.write_text("plugin: aorta.cluster.cluster_json\npath: cluster.json\nconnection_vars: false\n")
    other = tmp_path / "hosts.yml"
    other.write_text("all:\n  hosts: {a: {}}\n")
    assert campaign_run.source_options([str(other), str(own)]) == {"connection_vars": False}
    assert campaign_run.source_options([str(tmp_path / "cluster.json"), str(other)]) == {}
    assert campaign_run.source_options(None) == {}


def test_a_group_with_no_run_json_is_failed_and_says_where_its_console_is(tmp_path):
    where = tmp_path / "k2" / "g1"
    found = campaign_run.group_result(str(where), ["a", "b"], 2, "/c/k2/g1.console.log", str(tmp_path), "c-k2-g1")
    assert found["status"] == "FAILED" and found["nodes"] == ["a", "b"] and found["dir"] == "k2/g1"
    assert found["recorded"] is False and found["run_id"] == "c-k2-g1"
    never = campaign_run.group_result(str(tmp_path / "g"), ["a"], None, "/c/g.log", str(tmp_path), "c-k1-g0")
    assert never["status"] == "STOPPED"
    # An earlier run's run.json in the directory (its id is not the group's) is never read as the group's.
    where.mkdir(parents=True)
    (where / "run.json").write_text(json.dumps({"run_id": "old-k2-g1", "status": "COMPLETED", "nodes": []}))
    stale = campaign_run.group_result(str(where), ["a", "b"], 1, "log", str(tmp_path), "c-k2-g1")
    assert stale["status"] == "FAILED" and stale["recorded"] is False


def test_a_groups_run_json_and_report_are_read(tmp_path):
    where = tmp_path / "k1" / "g0"
    where.mkdir(parents=True)
    record = {"run_id": "c-k1-g0", "status": "COMPLETED", "nodes": [{"name": "a", "rank": 0}]}
    (where / "run.json").write_text(json.dumps(record))
    report = {"run": {"samples_per_second": 10.0}, "performance": {"avg_step_time_ms": 12.5}}
    (where / "aorta_benchmark_report.json").write_text(json.dumps(report))
    found = campaign_run.group_result(str(where), ["a"], 0, "log", str(tmp_path), "c-k1-g0")
    assert (found["status"], found["iteration_ms"], found["samples_per_second"], found["recorded"]) == (
        "COMPLETED",
        12.5,
        10.0,
        True,
    )


def test_a_directory_with_an_earlier_campaigns_groups_is_refused(tmp_path):
    assert campaign_run.earlier_campaign(str(tmp_path / "none")) == ""
    (tmp_path / "logs").mkdir()
    assert campaign_run.earlier_campaign(str(tmp_path)) == ""
    (tmp_path / "k2-rung3").mkdir()
    (tmp_path / "opening").mkdir()
    assert campaign_run.earlier_campaign(str(tmp_path)) == "k2-rung3, opening"  # killed before it recorded
    (tmp_path / "campaign.json").write_text("{}")
    assert campaign_run.earlier_campaign(str(tmp_path)) == "campaign.json"


def test_settings_given_as_key_value_strings_are_read_as_what_they_spell():
    found = campaign_run.checked(
        {"aorta_scaling_opening": "false", "aorta_scaling_parallel": "4", "aorta_scaling_sizes": "[1, 3]"}
    )
    assert found["aorta_scaling_opening"] is False and found["aorta_scaling_parallel"] == 4
    assert found["aorta_scaling_sizes"] == [1, 3]
    # Unset as YAML spells it, in the rules check_variables runs too.
    unset = {"aorta_scaling_seed": "null", "aorta_scaling_sizes": "null", "aorta_scaling_min_efficiency": "~"}
    assert _variables.check(unset) == []

    class Tagged(str):  # templated text reaches check_variables in a str subclass (the defaults are '')
        pass

    assert _variables.check({name: Tagged("") for name in unset}) == []
    found = campaign_run.checked(unset)
    assert (found["aorta_scaling_seed"], found["aorta_scaling_sizes"], found["aorta_scaling_min_efficiency"]) == (
        None,
        None,
        None,
    )


def test_the_campaign_stops_when_ansible_playbook_is_gone():
    assert campaign_run.stopper(os.getppid())() is False
    assert campaign_run.stopper(os.getppid() + 100000)() is True  # an AWX cancel killed its process group


def test_a_campaign_without_a_cluster_file_is_refused(play, tmp_path):
    _rc, out = play({"aorta.cluster.campaign_run": {}}, {"aorta_results_root": str(tmp_path)})
    assert out["failed"] and out["msg"] == "aorta_nodes: the inventory has no node to run the campaign on"


def test_a_bad_setting_is_refused_before_anything_runs(play, tmp_path):
    _rc, out = play(
        {"aorta.cluster.campaign_run": {}}, {"aorta_scaling_parallel": 0, "aorta_results_root": str(tmp_path)}
    )
    assert out["failed"] and out["msg"] == "aorta_scaling_parallel: 0 must be at least 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "play.yml"]  # no campaign directory
