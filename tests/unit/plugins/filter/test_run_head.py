# SPDX-License-Identifier: GPL-3.0-or-later
"""The run_head filter as Ansible loads it (by its FQCN) and as the watch's task calls it: the head
the launch elected, else the cluster file's; what it says is tested on plugin_utils/launch/_plan.py's
run_head."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template

GROUPS = {"aorta_head": ["h"], "aorta_nodes": ["h", "n"], "aorta_workers": ["n"]}


def render(expression, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_the_loader_finds_the_filter_by_its_fqcn_in_its_own_file():
    plugin = filter_loader.get("aorta.cluster.run_head")
    assert plugin is not None and plugin._original_path.endswith("plugins/filter/run_head.py")


def test_the_elected_head_else_the_cluster_files():
    expression = "{{ groups | aorta.cluster.run_head(hostvars) }}"
    elected = {"h": {"aorta_launch": {"head": "n"}}, "n": {"aorta_launch": {"head": "n"}}}
    assert render(expression, groups=GROUPS, hostvars=elected) == "n"
    assert render(expression, groups=GROUPS, hostvars={"h": {}, "n": {}}) == "h"
    assert render("{{ groups | aorta.cluster.run_head }}", groups=GROUPS) == "h"


def test_groups_without_nodes_fail_naming_the_filter():
    with pytest.raises(AnsibleError, match="run_head: the play's groups have no aorta_head"):
        render("{{ groups | aorta.cluster.run_head }}", groups={"all": ["x"]})
