# SPDX-License-Identifier: GPL-3.0-or-later
"""node_lease's action names the controller as the lease's owner (user, host, ansible-playbook pid)
unless the task names one, and hands every other argument to the module unchanged."""

from __future__ import annotations

from types import SimpleNamespace

from ansible_collections.aorta.cluster.plugins.action.node_lease import ActionModule
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._controller import controller_identity


def run(args: dict) -> dict:
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, action="aorta.cluster.node_lease")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    action = ActionModule(task, connection, SimpleNamespace(check_mode=False), None, None)
    sent: dict = {}

    def execute(module_name, module_args, task_vars):
        sent.update(module_name=module_name, module_args=module_args)
        return {"changed": True, "lease": "acquired"}

    action._execute_module = execute
    result = action.run(task_vars={})
    return {"result": result, **sent}


def test_the_controller_owns_the_lease_unless_the_task_says():
    done = run({"run_id": "r1", "directory": "/var/tmp/l", "state": "acquired"})
    assert done["module_name"] == "aorta.cluster.node_lease"
    assert done["module_args"] == {
        "run_id": "r1",
        "directory": "/var/tmp/l",
        "state": "acquired",
        "owner": controller_identity(),
    }
    assert done["result"]["lease"] == "acquired" and done["result"]["changed"] is True
    given = run({"run_id": "r1", "owner": "ci-job 42"})
    assert given["module_args"]["owner"] == "ci-job 42"
