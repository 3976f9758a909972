# SPDX-License-Identifier: GPL-3.0-or-later
"""Every action plugin derives from the one base (Step) and from no other step's action; a variable
is templated where the play has it; a lost connection is Unreachable; a controller task runs its
work with what it left out taken from the nodes."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from ansible.errors import AnsibleConnectionFailure

from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._step import ControllerTask, Step
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _watch

ACTIONS = sorted(p.stem for p in (Path(__file__).resolve().parents[5] / "plugins" / "action").glob("*.py"))
OWN = "ansible_collections.aorta.cluster.plugins.action."


@pytest.mark.parametrize("name", ACTIONS)
def test_each_action_is_a_step_and_inherits_no_other_steps_action(name):
    module = importlib.import_module(f"ansible_collections.aorta.cluster.plugins.action.{name}")
    action = module.ActionModule
    assert issubclass(action, Step), name
    others = [
        c
        for c in inspect.getmro(action)[1:]
        if c.__module__.startswith("ansible_collections.aorta.cluster.plugins.action.")
    ]
    assert others == [], f"{name} inherits {others}"


def step(cls=None, args=None, check_mode=False):
    task = SimpleNamespace(args=args or {}, async_val=0, check_mode=check_mode, action="aorta.cluster.x")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: f"templated {value}")
    return (cls or Plain)(task, connection, SimpleNamespace(check_mode=check_mode), None, templar)


def test_a_variable_is_templated_where_the_play_has_it_else_the_default():
    s = step()
    assert s._variable({"aorta_x": "{{ y }}"}, "aorta_x") == "templated {{ y }}"
    assert s._variable({}, "aorta_x", 7) == 7


def test_a_lost_connection_is_unreachable():
    s = step()

    def lost(command, sudoable):
        raise AnsibleConnectionFailure("ssh: connect to host n1 port 22: Connection timed out")

    s._low_level_execute_command = lost
    with pytest.raises(_watch.Unreachable, match="Connection timed out"):
        s._remote("true")


class Plain(Step):
    def run(self, tmp=None, task_vars=None):
        return super().run(tmp, task_vars)


class Doubled(ControllerTask):
    ARGUMENT_SPEC: ClassVar[dict] = {"value": {"type": "int"}, "nodes": {"type": "list", "elements": "str"}}
    TASK = staticmethod(lambda args, check: ({"doubled": args["value"] * 2, "nodes": args["nodes"]}, ""))
    NODE_VARS = ("aorta_launch",)

    def from_nodes(self, task_vars, nodes, groups, given):
        if "nodes" in given:
            return {}
        return {"nodes": sorted(nodes)} if nodes else {"skipped": "no node"}


def test_a_controller_task_takes_what_it_left_out_from_the_nodes_or_says_why_it_skipped():
    hostvars = {"n1": {"aorta_launch": {"nproc": 8}}, "n2": {"aorta_launch": {}}}
    task_vars = {"groups": {"aorta_nodes": ["n1", "n2"]}, "hostvars": hostvars}
    done = step(Doubled, {"value": 2}).run(task_vars=task_vars)
    assert done["doubled"] == 4 and done["nodes"] == ["n1", "n2"] and not done.get("failed")
    skipped = step(Doubled, {"value": 2}).run(task_vars={})
    assert skipped["skipped"] is True and skipped["msg"] == "no node"
