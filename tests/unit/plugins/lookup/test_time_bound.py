# SPDX-License-Identifier: GPL-3.0-or-later
"""The time_bound lookup: a task's timeout from the host's aorta_* variables, templated, by the
arithmetic of module_utils/node_runtime/_time_bounds.py; in-process, and as a task's timeout keyword."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import lookup_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds

VARIABLES = {
    "aorta_connect_timeout": 30,
    "aorta_fabric_check_timeout": 30,
    "aorta_health_checks": True,
    "aorta_health_step_timeout": 30,
    "aorta_setup_timeout_seconds": 1800,
    "aorta_timeout_seconds": 3600,
    "aorta_kill_grace_seconds": 30,
}


def query(*terms, **variables):
    templar = Templar(loader=DataLoader(), variables={"base": 10})
    lookup = lookup_loader.get("aorta.cluster.time_bound", loader=DataLoader(), templar=templar)
    return lookup.run(list(terms), variables={**VARIABLES, **variables})


def test_each_task_gets_the_number_the_playbook_wrote_in_jinja():
    wait = _time_bounds.deadlines(3600, 30, 1800, 30)["wait_s"]
    assert query("prepare", "launch", "watch", "end") == [30 + 30 + 300 + 12 * 30 + 60, 1800 + 120, wait, wait]


def test_the_variables_are_templated_and_flags_read_as_ansible_reads_them():
    assert query("launch", aorta_setup_timeout_seconds=trust_as_template("{{ base * 100 }}")) == [1120]
    assert query("prepare", aorta_health_checks="no") == [30 + 30 + 300]
    assert query("prepare", aorta_health_checks="yes", aorta_health_step_timeout="60") == [360 + 12 * 60 + 60]


def test_an_unknown_task_a_missing_or_a_bad_variable_is_one_line_naming_it():
    with pytest.raises(AnsibleLookupError, match="no task named 'run'"):
        query("run")
    lookup = lookup_loader.get("aorta.cluster.time_bound", loader=DataLoader(), templar=Templar(loader=DataLoader()))
    with pytest.raises(AnsibleLookupError, match=r"aorta_setup_timeout_seconds is not set; .*aorta\.cluster\.defaults"):
        lookup.run(["launch"], variables={})
    with pytest.raises(AnsibleLookupError, match="aorta_timeout_seconds must be a whole number of seconds, not 'soon'"):
        query("watch", aorta_timeout_seconds="soon")


def test_a_tasks_timeout_keyword_takes_it(play):
    task = {
        "ansible.builtin.debug": {"msg": "{{ lookup('aorta.cluster.time_bound', 'prepare') }}"},
        "timeout": "{{ lookup('aorta.cluster.time_bound', 'launch') }}",
    }
    rc, out = play(task, VARIABLES | {"aorta_connect_timeout": "{{ 10 + 5 }}"})
    assert rc == 0 and out["msg"] == 15 + 30 + 300 + 12 * 30 + 60, out
