# SPDX-License-Identifier: GPL-3.0-or-later
"""The variable rules: each bad value one line naming the variable and the value; good ones pass."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils._variables import check

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
        ("max_avg_iteration_ms", float("nan"), "above 0"),
        ("max_avg_iteration_ms", 0, "above 0"),
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
