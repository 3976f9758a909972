# SPDX-License-Identifier: GPL-3.0-or-later
"""A campaign's group run ids: made once (the campaign), recognised on the nodes (a stop by the
campaign's id), and the rung labels that are also the campaign's directories."""

from __future__ import annotations

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._campaign_ids import (
    OPENING,
    RUNG_DIR,
    group_run_id,
    of_campaign,
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
