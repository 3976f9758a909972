# SPDX-License-Identifier: GPL-3.0-or-later
"""A campaign's group run ids: made once (the campaign), recognised on the nodes (a stop by the
campaign's id), and the rung labels that are also the campaign's directories."""

from __future__ import annotations

import os
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import (
    OPENING,
    RUNG_DIR,
    STOP_KEEP_S,
    STOP_WORDS,
    campaign_of,
    group_run_id,
    mark_stop,
    of_campaign,
    stop_of,
)


@pytest.mark.parametrize("label", [OPENING, "k1", "k16", "k2-rung3"])
def test_every_rung_label_makes_a_run_id_of_the_campaign(label):
    assert RUNG_DIR.fullmatch(label)
    assert of_campaign("20261208T0100-ab12", group_run_id("20261208T0100-ab12", label, 7))


@pytest.mark.parametrize(
    "run_id",
    [
        "c7",  # the campaign's id itself
        "c7-k2",  # no group
        "c7-k2-g",  # no group number
        "c7x-k2-g1",  # another campaign that starts the same
        "c.7-k2-g1",  # a dot is not a wildcard
        "c7-k2-g1-extra",
        "c7-rung2-g1",
        None,
        7,
    ],
)
def test_what_is_not_a_group_run_of_the_campaign(run_id):
    assert not of_campaign("c7", run_id)
    assert not of_campaign("", "-k1-g0")


def test_a_campaign_whose_id_holds_regex_characters_is_matched_literally():
    assert of_campaign("c.7", "c.7-k1-g0") and not of_campaign("c.7", "cx7-k1-g0")
    assert not RUNG_DIR.fullmatch("g0") and not RUNG_DIR.fullmatch("k1-g0")


def test_a_group_run_names_its_campaign():
    assert campaign_of("c-7-k2-g1") == "c-7" and campaign_of("c-7-opening-g0") == "c-7"
    assert campaign_of("c7-k2-rung3-g0") == "c7" and campaign_of("c7") == "" and campaign_of(None) == ""


def test_a_campaigns_stop_left_on_a_node_refuses_its_later_group_runs_only(tmp_path):
    assert stop_of(str(tmp_path), "c7-k2-g1") == ""
    assert mark_stop(str(tmp_path), "c7", "stopped by aorta.cluster.stop from me at noon")
    assert mark_stop(str(tmp_path), "c7", "a second stop")  # the first one's reason is kept
    said = stop_of(str(tmp_path), "c7-k4-g0")
    assert said == "campaign c7 was stopped by aorta.cluster.stop from me at noon: its run c7-k4-g0 does not start"
    assert STOP_WORDS in said
    # Another campaign, an ordinary run, a run named like the campaign: untouched.
    assert stop_of(str(tmp_path), "c8-k1-g0") == "" and stop_of(str(tmp_path), "c7") == ""
    assert stop_of(str(tmp_path), "x-c7-k1-g0") == ""
    # An id that is not a run id's characters is never a path.
    assert not mark_stop(str(tmp_path), "../etc", "x") and not mark_stop(str(tmp_path), ".hidden", "x")
    assert sorted(p.name for p in (tmp_path / "stops").iterdir()) == ["c7"]


def test_marks_older_than_two_weeks_go_when_a_stop_is_left(tmp_path):
    mark_stop(str(tmp_path), "old", "x")
    old = tmp_path / "stops" / "old"
    os.utime(old, (time.time() - STOP_KEEP_S - 60,) * 2)
    mark_stop(str(tmp_path), "new", "y")
    assert sorted(p.name for p in (tmp_path / "stops").iterdir()) == ["new"]
