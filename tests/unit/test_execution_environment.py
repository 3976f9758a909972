# SPDX-License-Identifier: GPL-3.0-or-later
"""The execution-environment files: ansible-builder's own schema and readers accept them, and the
versions they pin are the ones this checkout is tested with. (No image is built here: the base
image and Galaxy are not reachable; tests/integration/test_packaging.py renders the build context.)"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import yaml
from ansible_builder._target_scripts import introspect
from ansible_builder.ee_schema import validate_schema
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# The collections the ansible package bundles: the venv every test here runs with.
BUNDLED = Path(str(importlib.metadata.distribution("ansible").locate_file("ansible_collections")))


def ee_definition() -> dict:
    return yaml.safe_load((REPO / "execution-environment.yml").read_text())


def dev_pins() -> dict[str, str]:
    pins = {}
    for raw in (REPO / "requirements-dev.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = version.strip()
    return pins


def test_definition_passes_ansible_builder_schema():
    definition = ee_definition()
    validate_schema(definition)
    assert definition["version"] == 3


def test_pinned_ansible_core_and_runner_are_the_tested_ones():
    deps = ee_definition()["dependencies"]
    pins = dev_pins()
    for key, dist in (("ansible_core", "ansible-core"), ("ansible_runner", "ansible-runner")):
        requirement = Requirement(deps[key]["package_pip"])
        assert requirement.name == dist
        assert importlib.metadata.version(dist) in requirement.specifier, (key, requirement)
        assert str(requirement.specifier) == f"=={pins[dist]}"


def test_galaxy_collections_are_this_artifact_alone():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    definition = ee_definition()
    collections = {c["name"]: c for c in definition["dependencies"]["galaxy"]["collections"]}
    artifact = f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    local = [name for name, c in collections.items() if c.get("type") == "file"]
    assert [name.rsplit("/", 1)[1] for name in local] == [artifact]
    added = definition["additional_build_files"][0]
    assert added["src"] == f"build/dist/{artifact}"
    assert (
        f"ADD _build/{added['dest']} {local[0].rsplit('/', 1)[0]}"
        in definition["additional_build_steps"]["prepend_galaxy"]
    )
    # aorta.cluster depends on no collection (an air-gapped install must not reach Galaxy), so the
    # EE bundles none beside it.
    assert galaxy["dependencies"] == {}
    assert list(collections) == local
    # A collection pinned from Galaxy again would have to be the version this checkout tests with.
    for name, entry in collections.items():
        if entry.get("type") != "file":
            manifest = BUNDLED.joinpath(*name.split("."), "MANIFEST.json")
            assert entry["version"] == yaml.safe_load(manifest.read_text())["collection_info"]["version"], name


def test_collection_meta_is_read_by_ansible_builder():
    """meta/execution-environment.yml as ansible-builder's introspection reads an installed collection."""
    python, system = introspect.process_collection(str(REPO))
    listed = [line for line in (REPO / "meta/ee-requirements.txt").read_text().splitlines() if line[:1].isalpha()]
    assert python == listed
    requirements = [Requirement(line) for line in python]
    assert {r.name for r in requirements} == {"msgspec", "py-spy"}
    pins = dev_pins()
    for requirement in requirements:
        assert pins[requirement.name] in requirement.specifier, requirement
    packages = {re.split(r"\s", line, maxsplit=1)[0] for line in system}
    assert {"zstd", "openssh-clients", "openssh-client"} <= packages and "rsync" not in packages
    for line in system:
        assert re.fullmatch(r"[A-Za-z0-9_.+-]+( \[[a-z:0-9 ]+\])?", line), line


def test_the_users_runtime_requirements_are_ansible_core_and_the_ees_packages():
    """requirements.txt (the README's install) = ansible-core in the range the collection supports,
    plus meta/ee-requirements.txt, the same file the execution environment installs."""
    lines = [line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert lines[1:] == ["cryptography<51", "-r meta/ee-requirements.txt"]
    # cryptography 51 prints a DSA deprecation warning at every ansible command (ansible-core imports DSA).
    assert dev_pins()["cryptography"] in Requirement(lines[1]).specifier
    core = Requirement(lines[0])
    assert core.name == "ansible-core" and dev_pins()["ansible-core"] in core.specifier
    required = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert required.replace(" ", "") in str(core.specifier).split(",")
