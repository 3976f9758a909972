# SPDX-License-Identifier: GPL-3.0-or-later
"""check_variables reads the variables as the play sees them, templated, and names each bad one;
it refuses aorta_* names the collection does not define, from extra vars or the nodes' own vars."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[4]


def test_bad_values_fail_naming_each_and_templated_good_ones_pass(play):
    _rc, out = play({"aorta.cluster.check_variables": {}}, {"aorta_output_dir": "../../etc", "aorta_poll_seconds": 0})
    assert out["failed"]
    assert out["errors"] == [
        "aorta_poll_seconds: 0 must be at least 1",
        "aorta_output_dir: '../../etc' must stay under aorta_path (a relative path that does not climb out with '..')",
    ]
    _rc, good = play(
        {"aorta.cluster.check_variables": {}},
        {"site_run": "r1", "aorta_output_dir": "aorta_runs/{{ site_run }}", "aorta_timeout_seconds": "60"},
    )
    assert not good.get("failed") and good["errors"] == []
    assert {"aorta_output_dir", "aorta_timeout_seconds"} <= set(good["checked"])


def test_a_misspelt_extra_var_is_refused_with_the_name_meant(play):
    _rc, out = play({"aorta.cluster.check_variables": {}}, {"aorta_timout_seconds": 60})
    assert out["failed"]
    assert out["errors"] == [
        "aorta_timout_seconds (extra vars) is not a variable of aorta.cluster; did you mean aorta_timeout_seconds? "
        "(a site's own aorta_* names go in aorta_site_variables)"
    ]


def test_a_sites_own_names_pass_when_listed(play):
    extra = {"aorta_site_owner": "team-a", "aorta_site_variables": ["aorta_site_*"]}
    _rc, out = play({"aorta.cluster.check_variables": {}}, extra)
    assert not out.get("failed") and out["errors"] == []


def test_the_empty_image_and_a_negative_straggler_threshold_are_refused(play):
    _rc, out = play(
        {"aorta.cluster.check_variables": {}}, {"aorta_docker_image": "", "aorta_straggler_threshold": -0.2}
    )
    assert out["errors"] == [
        "aorta_docker_image: '' must not be empty",
        "aorta_straggler_threshold: -0.2 must be a number above 0",
    ]


def test_a_misspelt_host_var_of_a_node_is_refused_naming_the_node(tmp_path):
    """A node's host_vars file beside the inventory: read without contacting the node."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "aorta_nodes": {
                            "hosts": {
                                # Unresolvable on purpose: the check must never connect.
                                "n0.invalid": {"aorta_node_rank": 0, "aorta_vpc_ip": "10.0.0.1"},
                                "n1.invalid": {"aorta_node_rank": 1, "aorta_vpc_ip": "10.0.0.2"},
                            }
                        },
                        # As the inventory plugin makes it: the head, rank 0, in a group of its own.
                        "aorta_head": {"hosts": {"n0.invalid": {}}},
                    }
                }
            }
        )
    )
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "n1.invalid.yml").write_text("aorta_gpus_per_nod: 4\n")
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "connection": "local",
                    "tasks": [{"aorta.cluster.check_variables": {}}],
                }
            ]
        )
    )
    repo = Path(__file__).resolve().parents[4]
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(playbook), "-i", str(inventory)]
    argv += ["-e", json.dumps({"ansible_python_interpreter": sys.executable})]
    proc = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert (
        "aorta_gpus_per_nod (host or group vars of n1.invalid) is not a variable of aorta.cluster; "
        "did you mean aorta_gpus_per_node?"
    ) in proc.stdout


def test_a_slice_of_the_cluster_is_refused_alone_before_any_variable(tmp_path):
    """An AWX sliced job: 2 of the file's 3 nodes, with a bad variable too: one line, the slice's."""
    hosts = {f"n{i}.invalid": {"aorta_node_rank": i, "aorta_vpc_ip": f"10.0.0.{i}"} for i in range(2)}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "aorta_nodes": {"hosts": hosts, "vars": {"aorta_cluster_nodes": 3}},
                        "aorta_head": {"hosts": {"n0.invalid": {}}},
                    }
                }
            }
        )
    )
    playbook = tmp_path / "play.yml"
    task = {"name": "check", "aorta.cluster.check_variables": {}}
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(playbook), "-i", str(inventory), "-e", "aorta_timeout_seconds=0"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "2 of 3 nodes: a --limit or an AWX sliced job." in proc.stdout
    assert "aorta_timeout_seconds" not in proc.stdout
