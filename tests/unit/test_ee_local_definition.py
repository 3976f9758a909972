# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/ee_local_definition.py: the definition `make ee` builds is the published one with only the
base, the interpreter, the collection sources and the options changed, and ansible-builder's schema
takes it; a bundled collection packed by it installs offline with every file's checksum checked."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_builder.ee_schema import validate_schema

REPO = Path(__file__).resolve().parents[2]
BUNDLED = Path(str(importlib.metadata.distribution("ansible").locate_file("ansible_collections")))
spec = importlib.util.spec_from_file_location("ee_local_definition", REPO / "tools" / "ee_local_definition.py")
assert spec and spec.loader
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def published() -> dict:
    return yaml.safe_load((REPO / "execution-environment.yml").read_text())


def test_the_local_definition_changes_only_the_unreachable_parts(tmp_path):
    definition = published()
    names = ["aorta-cluster-0.1.0.tar.gz"]  # the artifact alone: aorta.cluster depends on no collection
    for name in names:
        (tmp_path / name).write_bytes(b"")
    local = tool.local_definition(definition, tmp_path, "aorta-ee-base:abc", "aorta-cluster-ee:def")
    validate_schema(local)
    assert local["images"] == {"base_image": {"name": "aorta-ee-base:abc"}}
    assert local["dependencies"]["python_interpreter"]["python_path"] == "/usr/bin/python3"
    sources = [c["name"] for c in local["dependencies"]["galaxy"]["collections"]]
    assert sources == [f"{tool.IN_CONTEXT}/{name}" for name in names]
    assert all(c["type"] == "file" for c in local["dependencies"]["galaxy"]["collections"])
    assert local["options"]["package_manager_path"] == "/usr/local/bin/ee-apt"
    assert local["options"]["tags"] == ["aorta-cluster-ee:def"]
    for key in ("ansible_core", "ansible_runner", "system", "python"):
        assert local["dependencies"].get(key) == definition["dependencies"].get(key), key
    assert definition == published()  # the published definition is not touched


def test_a_pinned_galaxy_collection_comes_from_the_dist_with_its_dependencies_after_it(tmp_path):
    # The published file pins none today; one pinned again is taken from its packed tarball.
    definition = published()
    definition["dependencies"]["galaxy"]["collections"].append({"name": "ansible.posix", "version": "2.2.2"})
    names = ["aorta-cluster-0.1.0.tar.gz", "ansible-posix-2.2.2.tar.gz", "community-dependency-1.0.0.tar.gz"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    local = tool.local_definition(definition, tmp_path, "b", "t")
    validate_schema(local)
    assert [c["name"] for c in local["dependencies"]["galaxy"]["collections"]] == [
        f"{tool.IN_CONTEXT}/{name}" for name in names
    ]


def test_a_collection_the_definition_pins_but_the_dist_lacks_is_named(tmp_path):
    try:
        tool.local_definition(published(), tmp_path, "b", "t")
    except SystemExit as exc:
        assert "no aorta-cluster-0.1.0.tar.gz" in str(exc)
    else:
        raise AssertionError("accepted a dist without the artifact")


def test_a_bundled_collection_packed_here_installs_offline(tmp_path):
    artifact = tmp_path / "ansible-posix.tar.gz"
    tool.pack_installed(BUNDLED / "ansible" / "posix", artifact)
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    proc = subprocess.run(
        [str(galaxy), "collection", "install", "--offline", "--force", "-p", str(tmp_path / "c"), str(artifact)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = tmp_path / "c" / "ansible_collections" / "ansible" / "posix"
    assert (installed / "plugins" / "modules" / "synchronize.py").read_bytes() == (
        BUNDLED / "ansible" / "posix" / "plugins" / "modules" / "synchronize.py"
    ).read_bytes()
