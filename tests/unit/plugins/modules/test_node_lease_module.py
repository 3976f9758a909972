# SPDX-License-Identifier: GPL-3.0-or-later
"""node_lease as Ansible runs it: the module in a child Python process given its arguments as JSON,
and the module with its action plugin through ansible-playbook (the action names the owner)."""

from __future__ import annotations

import getpass
import re
import socket

import pytest

from ansible_collections.aorta.cluster.plugins.modules import node_lease


def fake_docker(tmp_path, listing=""):
    """A docker CLI stand-in for the two calls the module makes: `ps` lists, `rm` records."""
    script = tmp_path / "docker"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = ps ]; then printf "{listing}"; exit 0; fi\necho "$@" >> {tmp_path}/removed\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def lease_dir(tmp_path):
    return str(tmp_path / "lease")


def test_acquire_refuse_release(run_module, tmp_path, lease_dir):
    docker = fake_docker(tmp_path)
    first = run_module(node_lease, {"run_id": "a", "directory": lease_dir, "owner": "me@ctl", "docker": docker})
    assert first["result"] == "acquired" and first["changed"]
    again = run_module(node_lease, {"run_id": "b", "directory": lease_dir, "docker": docker})
    assert again["failed"] and "is held by run a (owner me@ctl" in again["msg"]
    assert again["holder"]["run_id"] == "a"
    checked = run_module(node_lease, {"run_id": "b", "directory": lease_dir, "docker": docker}, check=True)
    assert checked["failed"] and "run a" in checked["msg"]
    assert run_module(node_lease, {"run_id": "b", "directory": lease_dir, "state": "released"})["result"] == "not_held"
    assert run_module(node_lease, {"run_id": "a", "directory": lease_dir, "state": "released"})["result"] == "released"


def test_expired_lease_is_taken_over_and_orphans_of_other_runs_are_removed(run_module, tmp_path, lease_dir):
    docker = fake_docker(tmp_path, "c1 aorta-benchmark-old old\\nc2 aorta-benchmark-new new\\n")
    run_module(node_lease, {"run_id": "old", "directory": lease_dir, "expires_in": -1, "docker": docker})
    taken = run_module(node_lease, {"run_id": "new", "directory": lease_dir, "docker": docker})
    assert taken["result"] == "acquired" and taken["previous"]["run_id"] == "old"
    assert taken["removed_containers"] == ["aorta-benchmark-old (run old)"]
    # (the first call, for run old, had removed run new's c2 the same way)
    assert (tmp_path / "removed").read_text().splitlines()[-1].split() == ["rm", "-f", "-v", "c1"]
    assert "took over from run old" in taken["message"]


def test_release_with_a_node_rank_removes_that_ranks_containers_of_the_run_first(run_module, tmp_path, lease_dir):
    docker = fake_docker(tmp_path, "c9 aorta-benchmark-a\\n")
    run_module(node_lease, {"run_id": "a", "directory": lease_dir, "docker": docker})
    args = {"run_id": "a", "directory": lease_dir, "state": "released", "node_rank": "1", "docker": docker}
    checked = run_module(node_lease, args, check=True)
    assert checked["removed_containers"] == ["aorta-benchmark-a"] and not (tmp_path / "removed").exists()
    done = run_module(node_lease, args)
    assert done["result"] == "released" and done["removed_containers"] == ["aorta-benchmark-a"]
    assert done["message"] == "removed aorta-benchmark-a; lease of run a released"
    assert (tmp_path / "removed").read_text().splitlines()[-1].split() == ["rm", "-f", "-v", "c9"]


def test_owner_is_this_controller_and_another_run_is_refused_naming_it(play, tmp_path):
    directory = str(tmp_path / "lease")
    _rc, first = play({"aorta.cluster.node_lease": {"run_id": "run-a", "directory": directory}})
    assert first["result"] == "acquired"
    _rc, second = play({"aorta.cluster.node_lease": {"run_id": "run-b", "directory": directory}})
    assert second["failed"]
    owner = second["holder"]["owner"]
    assert re.fullmatch(rf"{getpass.getuser()}@{re.escape(socket.gethostname())} \(ansible-playbook pid \d+\)", owner)
    assert "held by run run-a" in second["msg"]
