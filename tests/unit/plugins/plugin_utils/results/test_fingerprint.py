# SPDX-License-Identifier: GPL-3.0-or-later
"""A run's fingerprint (what makes two runs comparable) and how two differ, line by line. Runs are
made from docs/samples/run.json."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._run_context import effective_config
from ansible_collections.aorta.cluster.plugins.plugin_utils.results import _fingerprint as fpr

REPO = Path(__file__).resolve().parents[5]


SAMPLE = json.loads((REPO / "docs" / "samples" / "run.json").read_text())


START = SAMPLE["started_epoch"]


OTHER_IMAGE = "sha256:" + "cd" * 32


# The sample's base config as its head read it (its effective_config is this, without overrides).
STANDIN_CONFIG = (REPO / "tests" / "standin" / "workload" / "config" / "standin.yaml").read_text()


def run_doc(run_id: str, started: int = START, **changes) -> dict:
    """The sample run.json as run ``run_id``; ``changes``: image_id, status, overrides, base_config,
    config_text (the base config's content), verdict, or a callable ``edit`` given the document. The
    effective config follows the overrides and the content as run_record writes it."""
    run = copy.deepcopy(SAMPLE)
    run["run_id"], run["started_epoch"], run["finished_epoch"] = run_id, started, started + 20
    for key in ("image", "image_id", "overrides", "base_config", "gpus_per_node"):
        if key in changes:
            run["context"][key] = changes[key]
    if "overrides" in changes or "config_text" in changes:
        text = changes.get("config_text", STANDIN_CONFIG)
        run["context"]["effective_config"] = effective_config(text, run["context"]["overrides"])
    if "status" in changes:
        run["status"] = changes["status"]
    if "verdict" in changes:
        run["verdict"] = changes["verdict"]
    if "edit" in changes:
        changes["edit"](run)
    return run


def test_fingerprint_of_the_sample():
    fp = fpr.fingerprint(SAMPLE)
    assert fp == {
        "nodes": ["192.168.128.2", "192.168.144.2"],
        "image_id": SAMPLE["context"]["image_id"],
        "gpus_per_node": 2,
        "rocm": ["6.2.4"],
        "amdgpu": ["6.8.5"],
        "config": {"effective": {"model.model_dim": 64, "training.batch_size": 8}},
    }
    assert len(fpr.fingerprint_id(fp)) == 12
    assert fpr.fingerprint_id(fp) == fpr.fingerprint_id(json.loads(json.dumps(fp)))


def test_the_effective_config_decides_not_the_base_configs_path():
    same_work = run_doc("a", base_config="/elsewhere/copy-of-standin.yaml")
    assert fpr.fingerprint_id(fpr.fingerprint(same_work)) == fpr.fingerprint_id(fpr.fingerprint(SAMPLE))
    edited = run_doc("b", config_text=STANDIN_CONFIG.replace("model_dim: 64", "model_dim: 128"))
    assert fpr.differences(fpr.fingerprint(edited), fpr.fingerprint(SAMPLE)) == ["config model.model_dim: 128 vs 64"]
    # A run.json of an earlier version (no effective_config): the base config's path and the overrides.
    earlier = run_doc("c", overrides={"training.lr": 0.1, "profiling.active": 3})
    del earlier["context"]["effective_config"]
    assert fpr.fingerprint(earlier)["config"] == {
        "base_config": "config/standin.yaml",
        "overrides": {"training.lr": "0.1"},
    }
    assert fpr.differences(fpr.fingerprint(earlier), fpr.fingerprint(SAMPLE)) == [
        "config: only one of the two runs recorded its effective config (an earlier version?)"
    ]


def test_fingerprint_ignores_keys_that_do_not_change_a_step():
    plain = fpr.fingerprint_id(fpr.fingerprint(run_doc("a", overrides={"training.lr": 0.1})))
    neutral = {
        "training.lr": 0.1,
        "training.max_steps": 50,
        "profiling.active": 3,
        "profiling.wait": 1,
        "standin.slow_rank": 2,
        "training.output_dir": "/scratch/run-2",
        "dataset.cache_dir": "/tmp/x",
        "logging.level": "debug",
    }
    ignore = ["dataset.cache_dir", "logging.*"]
    assert fpr.fingerprint_id(fpr.fingerprint(run_doc("b", overrides=neutral), ignore)) == plain
    assert fpr.fingerprint_id(fpr.fingerprint(run_doc("b", overrides=neutral))) != plain
    # The overrides' forms a run may hold (a mapping, key=value text, JSON text) give one fingerprint.
    text = fpr.fingerprint(run_doc("c", overrides="training.lr=0.1 training.max_steps=9"))
    assert fpr.fingerprint_id(text) == plain
    assert fpr.fingerprint_id(fpr.fingerprint(run_doc("d", overrides='{"training.lr": 0.1}'))) == plain


@pytest.mark.parametrize(
    "changes",
    [
        {"image_id": OTHER_IMAGE},
        {"overrides": {"training.batch_size": 16}},
        {"config_text": STANDIN_CONFIG.replace("batch_size: 8", "batch_size: 16")},
        {"gpus_per_node": 8},
        {"edit": lambda run: run["nodes"][1]["fingerprint"].update(rocm="6.3.0")},
        {"edit": lambda run: run["nodes"][0]["fingerprint"].update(amdgpu="6.10.5")},
        {"edit": lambda run: run["nodes"][1].update(name="10.0.0.3")},
        {"edit": lambda run: run["nodes"].pop()},
    ],
)
def test_fingerprint_changes_with_what_changes_the_work(changes):
    assert fpr.fingerprint_id(fpr.fingerprint(run_doc("x", **changes))) != fpr.fingerprint_id(fpr.fingerprint(SAMPLE))


def test_fingerprint_leaves_out_excluded_nodes_and_falls_back_to_the_nodes_image():
    run = run_doc("x")
    run["nodes"].append({"name": "10.0.0.9", "state": "excluded", "fingerprint": {"rocm": "5.7"}})
    run["excluded"] = [{"name": "10.0.0.9", "reasons": ["no GPU"]}]
    assert fpr.fingerprint(run) == fpr.fingerprint(SAMPLE)
    run["context"]["image_id"] = None
    assert fpr.fingerprint(run)["image_id"] == SAMPLE["nodes"][0]["fingerprint"]["image_id"]


def test_differences_one_line_per_part():
    a = fpr.fingerprint(run_doc("a", overrides={"training.lr": 0.1}))
    b = fpr.fingerprint(
        run_doc("b", image_id=OTHER_IMAGE, edit=lambda run: run["nodes"][1].update(name="10.0.0.3")),
    )
    lines = fpr.differences(a, b)
    assert lines[0].startswith("image id sha256:2dedea257549") and "vs sha256:cdcdcdcdcdcd" in lines[0]
    assert lines[1] == "nodes: 2 vs 2; 192.168.144.2 only in this run; 10.0.0.3 only in the other"
    assert lines[2] == "config training.lr: 0.1 vs unset"
    assert len(lines) == 3
    assert fpr.differences(a, a) == []
