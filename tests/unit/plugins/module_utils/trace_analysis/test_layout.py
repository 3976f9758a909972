# SPDX-License-Identifier: GPL-3.0-or-later
"""Aorta's pair: one profiler window written as TensorBoard's file and as the Chrome trace."""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._layout import aorta_pairs


def test_one_tensorboard_file_beside_one_chrome_trace_is_the_pair():
    paths = [
        "t/rank0/host-a_4242.1758927066581847260.pt.trace.json",
        "t/rank0/trace_step6.json",
        "t/rank1/host-a_4243.1758927066581847999.pt.trace.json",
        "t/rank1/trace.json",
    ]
    assert aorta_pairs(paths) == {
        "t/rank0/host-a_4242.1758927066581847260.pt.trace.json": "t/rank0/trace_step6.json",
        "t/rank1/host-a_4243.1758927066581847999.pt.trace.json": "t/rank1/trace.json",
    }


def test_any_other_mix_is_left_alone():
    assert aorta_pairs(["a/x.pt.trace.json"]) == {}  # TensorBoard only (Aorta's default.yaml)
    assert aorta_pairs(["a/trace.json"]) == {}  # Chrome only
    assert aorta_pairs(["a/x.pt.trace.json", "a/trace_step4.json", "a/trace_step8.json"]) == {}
    assert aorta_pairs(["a/x.pt.trace.json", "a/y.pt.trace.json", "a/trace.json"]) == {}
    assert aorta_pairs(["a/x.pt.trace.json", "b/trace.json"]) == {}  # not one directory
