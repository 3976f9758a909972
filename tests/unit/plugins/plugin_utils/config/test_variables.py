# SPDX-License-Identifier: GPL-3.0-or-later
"""The variable rules: each bad value one line naming the variable and the value; good ones pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _cluster_file
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._variables import INTERNAL, check, unknown_names
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import USER

BAD = [
    ("aorta_timeout_seconds", -5, "must be at least 1"),
    ("aorta_timeout_seconds", "soon", "is not a whole number"),
    ("aorta_nproc_per_node", -1, "must be at least 1"),
    ("aorta_nproc_per_node", 0, "must be at least 1"),
    ("aorta_kill_grace_seconds", -1, "must be at least 0"),
    ("aorta_master_port", 80, "from 1024 to 65535"),
    ("aorta_master_port", 70000, "from 1024 to 65535"),
    ("aorta_collect_parallel", 0, "must be at least 1"),
    ("aorta_output_dir", "../../etc", "must stay under aorta_path"),
    ("aorta_output_dir", "runs/../../x", "must stay under aorta_path"),
    ("aorta_output_dir", "/etc", "not absolute"),
    ("aorta_output_dir", ".", "must stay under aorta_path"),
    ("aorta_output_dir", "", "must not be empty"),
    ("aorta_path", "aorta", "absolute path"),
    ("aorta_lease_dir", "/var/../etc", "absolute path"),
    ("aorta_extra_env", {"BAD NAME": 1, "OK": 2}, "BAD NAME"),
    ("aorta_training_overrides", {"a;rm -rf": 1}, "a;rm -rf"),
    ("aorta_poll_seconds", 1.5, "is not a whole number"),
    ("aorta_gpus_per_node", True, "is not a whole number"),
]


@pytest.mark.parametrize("name,value,reason", BAD)
def test_each_bad_value_is_one_line_naming_variable_and_value(name, value, reason):
    errors = check({name: value})
    assert len(errors) == 1
    assert errors[0].startswith(f"{name}: {value!r} ") and reason in errors[0]


def test_good_values_and_unset_optional_ones_pass():
    assert (
        check(
            {
                "aorta_timeout_seconds": "3600",
                "aorta_nproc_per_node": None,
                "aorta_master_port": 0,
                "aorta_gpus_per_node": "8",
                "aorta_port_range_start": 29500,
                "aorta_port_range_end": 32767,
                "aorta_output_dir": "aorta_runs/run-1",
                "aorta_path": "/home/me/aorta",
                "aorta_extra_env": {"NCCL_DEBUG": "INFO"},
                "aorta_training_overrides": {"training.max_steps": 5},
                "aorta_kill_grace_seconds": 0,
            }
        )
        == []
    )


def test_port_range_upside_down_is_named():
    assert check({"aorta_port_range_start": 31000, "aorta_port_range_end": 30000}) == [
        "aorta_port_range_start: 31000 is above aorta_port_range_end 30000"
    ]


@pytest.mark.parametrize(
    "name,value,words",
    [
        ("min_compute_ratio", 1.1, "from 0 to 1"),
        ("min_overlap_ratio", -0.1, "from 0 to 1"),
        ("max_avg_iteration_ms", float("nan"), "from 0"),
        ("max_avg_iteration_ms", -5, "from 0"),
        ("max_time_variance_ratio", "lots", "is not a number"),
    ],
)
def test_bad_thresholds_are_named_with_their_key_before_the_launch(name, value, words):
    errors = check({"aorta_expected_results": {"min_compute_ratio": 0.5, name: value}})
    assert len(errors) == 1
    assert errors[0].startswith(f"aorta_expected_results: {name}: {value!r} ") and words in errors[0]


def test_cvs_default_thresholds_pass_and_an_unknown_one_is_named():
    cvs = {"max_avg_iteration_ms": 12000, "min_compute_ratio": 0.01, "min_overlap_ratio": 0.0}
    assert check({"aorta_expected_results": dict(cvs, max_time_variance_ratio="0.5")}) == []
    (error,) = check({"aorta_expected_results": dict(cvs, max_avg_iteration=5)})
    assert "unknown threshold max_avg_iteration" in error


def test_a_survey_answer_in_text_is_read_as_the_task_reads_it():
    assert check({"aorta_expected_results": "max_avg_iteration_ms=600000 min_compute_ratio=0.0"}) == []
    assert check({"aorta_expected_results": '{"min_compute_ratio": 0.5}'}) == []
    (error,) = check({"aorta_expected_results": "min_compute_ratio=2"})
    assert error.startswith("aorta_expected_results: min_compute_ratio: '2' ")


def test_empty_image_and_non_positive_straggler_threshold_are_refused():
    assert check({"aorta_docker_image": "  "}) == ["aorta_docker_image: '  ' must not be empty"]
    assert check({"aorta_straggler_threshold": -0.2}) == ["aorta_straggler_threshold: -0.2 must be a number above 0"]
    assert check({"aorta_straggler_threshold": 0}) == ["aorta_straggler_threshold: 0 must be a number above 0"]
    assert check({"aorta_straggler_threshold": "x"}) == ["aorta_straggler_threshold: 'x' is not a number"]
    assert check({"aorta_straggler_threshold": "0.1", "aorta_docker_image": "rocm/pytorch:latest"}) == []


def test_unknown_names_suggest_the_nearest_user_variable_once_each():
    lines = unknown_names(
        {
            "extra vars": ["aorta_timout_seconds", "aorta_timeout_seconds", "other", "aorta_node_rank"],
            "host or group vars of n1": ["aorta_timout_seconds", "aorta_zzz"],
        }
    )
    assert lines == [
        "aorta_timout_seconds (extra vars) is not a variable of aorta.cluster; did you mean aorta_timeout_seconds? "
        "(a site's own aorta_* names go in aorta_site_variables)",
        "aorta_zzz (host or group vars of n1) is not a variable of aorta.cluster "
        "(a site's own aorta_* names go in aorta_site_variables)",
    ]
    assert unknown_names({"extra vars": ["aorta_site_owner", "aorta_lab"]}, ["aorta_site_*", "aorta_lab"]) == []


def _walk(node, out: set[str]) -> None:
    """Names a task list sets: set_fact keys, register, vars, loop_var and add_host's variables."""
    if isinstance(node, list):
        for item in node:
            _walk(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.set_fact", "ansible.builtin.add_host") and isinstance(value, dict):
                out.update(value)
            elif key == "register" and isinstance(value, str):
                out.add(value)
            elif key == "vars" and isinstance(value, dict):
                out.update(value)
            elif key == "loop_control" and isinstance(value, dict) and "loop_var" in value:
                out.add(value["loop_var"])
            _walk(value, out)


def test_internal_names_are_exactly_those_the_collection_sets(fixtures_dir):
    """INTERNAL is what the roles, playbooks and inventory set and no more: a new fact can never
    be refused as a misspelling, and a stale entry never hides one."""
    repo = Path(__file__).resolve().parents[5]
    found: set[str] = set()
    for path in [*repo.glob("roles/*/tasks/*.yml"), *repo.glob("playbooks/*.yml")]:
        _walk(yaml.safe_load(path.read_text()), found)
    cluster = _cluster_file.read(str(fixtures_dir / "cluster_files" / "filled" / "cluster.json"))
    found.update(_cluster_file.group_vars(cluster))
    for record in _cluster_file.host_records(cluster):
        found.update(record["vars"])
    found = {name for name in found if name.startswith("aorta_")} - USER
    assert found == set(INTERNAL)
    assert not INTERNAL & USER


def test_the_image_pull_policy_is_missing_or_never():
    assert check({"aorta_image_pull": "never"}) == check({"aorta_image_pull": "missing"}) == []
    assert check({"aorta_image_pull": "always"}) == ["aorta_image_pull: 'always' must be one of missing, never"]
