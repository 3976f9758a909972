# SPDX-License-Identifier: GPL-3.0-or-later
"""_vocabulary.py is roles/variables.yml as the plugins read it (generated: tests/unit/
test_argument_specs.py keeps it current): every name, the names each role's step reads, and each
CVS key's variable, checked here against the YAML itself."""

from __future__ import annotations

import yaml

from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import CVS_KEYS, DEFAULTS, READ_BY, USER


def _source(repo) -> dict:
    return yaml.safe_load((repo / "roles" / "variables.yml").read_text())


def test_every_name_users_set_or_the_run_sets_is_known(repo):
    source = _source(repo)
    assert frozenset(source["variables"]) | frozenset(source["required"]) == USER


def test_each_roles_names_are_those_the_yaml_gives_it(repo):
    source = _source(repo)
    every = {**source["required"], **source["variables"]}
    assert set(READ_BY) == set(source["roles"])
    for role, names in READ_BY.items():
        assert set(names) == {name for name, spec in every.items() if role in spec.get("roles", ())}, role
        assert list(names) == sorted(names)


def test_each_cvs_key_sets_the_variable_that_names_it(repo):
    variables = _source(repo)["variables"]
    assert {spec["cvs"]: name for name, spec in variables.items() if spec.get("cvs")} == CVS_KEYS
    assert CVS_KEYS["docker.image"] == "aorta_docker_image" and CVS_KEYS["gpus_per_node"] == "aorta_gpus_per_node"


def test_each_default_is_the_one_the_yaml_gives_and_the_defaults_role_holds(repo):
    variables = _source(repo)["variables"]
    role = yaml.safe_load((repo / "roles" / "defaults" / "defaults" / "main.yml").read_text())
    plain = {name: spec["default"] for name, spec in variables.items() if "{{" not in str(spec["default"])}
    assert plain == DEFAULTS
    assert all(role[name] == value for name, value in DEFAULTS.items())
