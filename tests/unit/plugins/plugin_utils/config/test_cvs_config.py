# SPDX-License-Identifier: GPL-3.0-or-later
"""A CVS aorta_benchmark.yaml maps onto aorta_* variables; unknown keys are an error."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._cvs_config import cvs_config
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError


def test_the_example_cvs_file_maps_completely(repo):
    data = yaml.safe_load((repo / "inventories" / "example" / "aorta_benchmark.yaml").read_text())
    mapped = cvs_config(data, "aorta_benchmark.yaml", "alice")
    v = mapped["vars"]
    assert v["aorta_path"] == "/home/alice/aorta"
    assert v["aorta_docker_image"] == "jeffdaily/pytorch:torchrec-dlrm-complete"
    assert v["aorta_docker_privileged"] is True
    assert v["aorta_environment"]["NCCL_MAX_NCHANNELS"] == 112
    assert v["aorta_training_overrides"] == {"training.max_steps": 15, "profiling.active": 6}
    assert v["aorta_master_launch_mode"] == "auto" and v["aorta_master_port"] is None
    assert v["aorta_extra_train_args"] == ["--enable-rocm-metrics"]
    assert v["aorta_extra_env"] == {"NCCL_IB_GID_INDEX": "3"}
    assert v["aorta_expected_results"]["max_avg_iteration_ms"] == 12000
    assert v["aorta_rccl_branch"] == "develop" and v["aorta_rccl_build_path"] == "/mnt/rccl"
    assert all(name.startswith("aorta_") for name in v)
    assert any(line.startswith("rccl.clone_url:") for line in mapped["not_used"])
    assert any(line.startswith("analysis.enable_tracelens:") for line in mapped["not_used"])


@pytest.mark.parametrize(
    "data,words",
    [
        ({"dockr": {"image": "x"}}, "f.yaml: dockr: unknown CVS key"),
        ({"docker": {"imag": "x"}}, "f.yaml: docker.imag: unknown CVS key"),
        ({"multi_node": {"nnodes": 2}}, "f.yaml: multi_node.nnodes: unknown CVS key"),
        ({"docker": "rocm/x"}, "f.yaml: docker: must be a mapping"),
        ({"aorta_path": "/home/<changeme>/aorta"}, "contains <changeme>"),
        (["not", "a", "mapping"], "expected a YAML mapping"),
    ],
)
def test_bad_cvs_files_are_clear_errors(data, words):
    with pytest.raises(LaunchError, match=words.replace(".", r"\.")):
        cvs_config(data, "f.yaml", "u")


def test_zero_means_auto_like_cvs():
    mapped = cvs_config({"multi_node": {"master_port": 0, "nproc_per_node": 0}}, "f.yaml", "u")
    assert mapped["vars"]["aorta_master_port"] is None and mapped["vars"]["aorta_nproc_per_node"] is None
