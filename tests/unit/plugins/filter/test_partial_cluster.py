# SPDX-License-Identifier: GPL-3.0-or-later
"""The partial_cluster filter as Ansible loads it (by its FQCN) and as a play's template calls it;
what it says is tested on plugin_utils/cluster/_cluster_file.py's partial_cluster."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import partial_cluster


def render(expression, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_the_loader_finds_the_filter_by_its_fqcn_in_its_own_file():
    plugin = filter_loader.get("aorta.cluster.partial_cluster")
    assert plugin is not None and plugin.ansible_name == "aorta.cluster.partial_cluster"
    assert plugin._original_path.endswith("plugins/filter/partial_cluster.py")
    assert plugin.j2_function(4, 8) == partial_cluster(4, 8)


def test_a_template_gets_the_refusal_naming_k_of_n_or_nothing():
    message = render("{{ 4 | aorta.cluster.partial_cluster(8) }}")
    assert message == partial_cluster(4, 8) and message.startswith("4 of 8 nodes: a --limit or an AWX sliced job.")
    assert render("{{ 8 | aorta.cluster.partial_cluster(8) }}") == ""
    # As inventory_guard.yml writes it: the count from the group variables, none when the inventory has none.
    expression = "{{ nodes | length | aorta.cluster.partial_cluster(total | default(none)) }}"
    assert render(expression, nodes=["a", "b"], total="3").startswith("2 of 3 nodes")
    assert render(expression, nodes=["a", "b"]) == ""


def test_total_is_optional_as_its_documentation_says():
    assert render("{{ 3 | aorta.cluster.partial_cluster }}") == ""


def test_a_count_that_is_not_a_number_fails_the_task_naming_the_filter():
    with pytest.raises(AnsibleFilterError, match="partial_cluster: node counts must be integers"):
        render("{{ 2 | aorta.cluster.partial_cluster('three') }}")
