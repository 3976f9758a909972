# SPDX-License-Identifier: GPL-3.0-or-later
"""The effective config's batch size and sequence length: base config plus the run's overrides,
merged as Aorta merges them."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._run_context import effective_config, run_settings


def test_the_base_config_alone():
    text = "training:\n  batch_size: 64\n  gradient_accumulation: 16\ndataset:\n  sequence_length: 256\n"
    assert run_settings(text, {}) == {"batch_size": 64, "sequence_length": 256, "note": ""}


def test_overrides_win_in_every_form_a_user_gives_them():
    text = "training:\n  batch_size: 64\ndataset:\n  sequence_length: 256\n"
    assert run_settings(text, {"training.batch_size": 8})["batch_size"] == 8
    assert run_settings(text, "training.batch_size=4 dataset.sequence_length=128") == {
        "batch_size": 4,
        "sequence_length": 128,
        "note": "",
    }
    assert run_settings(text, '{"dataset.sequence_length": 512}')["sequence_length"] == 512
    assert run_settings("", {"training.batch_size": 2}) == {
        "batch_size": 2,
        "sequence_length": None,
        "note": "the base config was not read on the head",
    }


def test_what_cannot_be_read_is_said_not_guessed():
    assert run_settings("training: [", {}, "config/x.yaml")["note"].startswith("config/x.yaml is not YAML")
    assert run_settings("training:\n  batch_size: lots\n", {})["batch_size"] is None
    assert run_settings("training:\n  batch_size: 0\n", {})["batch_size"] is None


def test_the_effective_config_is_the_base_config_with_the_overrides_flattened():
    text = "training:\n  batch_size: 64\n  lr: 0.1\nmodel:\n  layers: [1, 2]\n  extra: {}\nstarted: 2026-12-01\n"
    found = effective_config(text, "training.batch_size=8 model.dim=128")
    assert found == {
        "model.dim": 128,
        "model.extra": {},
        "model.layers": [1, 2],
        "started": "2026-12-01",
        "training.batch_size": 8,
        "training.lr": 0.1,
    }
    assert list(found) == sorted(found)
    # Not known: the base config not read on the head, not a mapping, or overrides that do not parse.
    assert effective_config("", {}) is None
    assert effective_config("- a\n", {}) is None
    assert effective_config(text, "training.batch_size") is None
    # As Aorta coerces an override: [a,b] is a list of text; NaN and infinity are kept as text.
    assert effective_config("a: .nan\nb: .inf\n", "c=[x,2] d=[]") == {"a": "nan", "b": "inf", "c": ["x", "2"], "d": []}
