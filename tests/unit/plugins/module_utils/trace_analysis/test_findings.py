# SPDX-License-Identifier: GPL-3.0-or-later
"""The findings' one home: each kind's lines from run.json and the report, empty when nothing was
found or the source is missing (a folder of traces, a run of an earlier version)."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _findings

SWEEP = {
    "ran": True,
    "slow": [{"node": "n2", "direction": "send", "send_gbps": 0.19, "median_gbps": 3.8, "ratio": 0.05}],
}


def test_nothing_found_is_every_kind_empty():
    assert _findings.found({}, {}) == {kind: [] for kind in _findings.KINDS}
    assert _findings.found(None, None) == {kind: [] for kind in _findings.KINDS}


def test_run_json_alone_gives_the_sweep_drift_and_link_errors():
    record = {
        "fabric_sweep": SWEEP,
        "drift": [{"label": "amdgpu driver", "count": 1, "of": 3, "majority": "6.8.5", "nodes": [["n3", "6.7.0"]]}],
        "link_errors": [{"node": "n1", "interface": "ens1", "grew": {"rx_errors": 12}}],
    }
    found = _findings.found(record, None)
    assert found["slow_link"] == ["n2: fabric 0.19 Gbit/s sent against a median of 3.8 Gbit/s (0.05x)"]
    assert found["drift"] == ["amdgpu driver: 1 of 3 nodes differ from 6.8.5: n3 (6.7.0)"]
    assert found["link_errors"] == ["n1 (ens1): rx_errors +12"]
    assert found["slow_node"] == found["straggler"] == found["baseline_regression"] == []


def test_a_sweep_that_did_not_run_names_nothing_even_with_leftover_entries():
    assert _findings.found({"fabric_sweep": dict(SWEEP, ran=False)}, None)["slow_link"] == []


def test_the_report_gives_slow_nodes_stragglers_and_a_regression_only():
    report = {
        "slow_nodes": [{"node": "n2", "ranks": [2, 3], "excess_ratio": 0.3, "slowest_steps": 6, "steps": 6}],
        "stragglers": [],
        "baseline": {"verdict": "within noise", "metrics": {}},
    }
    found = _findings.found({}, report)
    assert found["slow_node"] == ["node n2: compute +30% over the median node (ranks 2,3; slowest in 6 of 6 steps)"]
    assert found["baseline_regression"] == []
    regression = {"verdict": "regression", "tolerance": 0.05, "metrics": {}}
    assert _findings.found({}, {"baseline": regression})["baseline_regression"] == [
        "regression against the baseline: avg step time longer, beyond the 5% tolerance"
    ]


def test_a_reason_is_its_word_its_first_line_and_a_count():
    assert _findings.reason("slow_link", ["a", "b", "c"]) == "slow link: a (+2 more)"
    assert _findings.reason("baseline_regression", ["regression against the baseline: x"]) == (
        "regression against the baseline: x"
    )


def test_the_kinds_to_ignore_are_a_list_or_text_and_a_misspelt_one_is_refused_naming_it():
    assert _findings.kinds_of(["slow_link", "drift"]) == ["slow_link", "drift"]
    # -e aorta_verdict_ignores=slow_link, or an AWX survey's text: not read character by character.
    assert _findings.kinds_of("slow_link") == ["slow_link"]
    assert _findings.kinds_of("slow_link, drift link_errors") == ["slow_link", "drift", "link_errors"]
    assert _findings.kinds_of(None) == [] and _findings.kinds_of("") == []
    with pytest.raises(
        ValueError, match=r"aorta_verdict_ignores: slow_lnk names no finding kind \(the kinds: slow_node, "
    ):
        _findings.kinds_of(["slow_lnk"])
    with pytest.raises(ValueError, match="is not a list of finding kinds"):
        _findings.kinds_of(3)
