# SPDX-License-Identifier: GPL-3.0-or-later
"""run_attach's decision, from what a node answered: the launch's own results back (job and all), a
node the run excluded ended as excluded, a wrong id refused on the head only (one line naming who
holds the node), a finished run said to a stop, once, and left alone."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.aorta.cluster.plugins.action.run_attach import ActionModule, attachment, stop_args, unconfirmed
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds

KEPT = {
    "launch": {
        "rank": 2,
        "head": "h",
        "status_path": "/var/tmp/aorta-cluster/runs/r1.json",
        "deadlines": {"wait_s": 9},
    },
    "prepare": {"reached": True, "derived": {"fingerprint": {"kernel": "6.8"}}},
    "run_started_epoch": 1700000000,
    "supervisor_pid": 42,
    "started": {"container_id": "c0ffee", "start_floor": 1.5},
}
OURS = {"run_id": "r1", "live": True, "line": "run r1 (owner me@ctl, lease until ...)"}
OTHER = {"run_id": "r9", "live": True, "line": "run r9 (owner you@ctl2, lease until 2026-12-06T12:00:00Z)"}


def test_what_the_launch_kept_is_the_launch_result_again_with_its_job():
    done = attachment("n2", False, "r1", {"attach": KEPT, "status": {"state": "running"}, "lease": OURS}, "watch")
    assert not done.get("failed") and done["prepare"] == KEPT["prepare"] and done["state"] == "running"
    assert done["launch"]["job"] == {"pid": 42, "status_path": "/var/tmp/aorta-cluster/runs/r1.json"}
    assert done["launch"]["rank"] == 2 and done["launch"]["started"] == KEPT["started"]
    assert done["run_started_epoch"] == 1700000000


def test_a_node_the_run_excluded_is_ended_as_excluded():
    done = attachment("n3", False, "r1", {"attach": None, "status": None, "lease": OURS}, "watch")
    assert done["launch"] == {"excluded": True} and done["prepare"]["excluded"] and done["state"] == "excluded"
    assert "excluded from run r1" in done["prepare"]["failures"][0]


def test_a_wrong_id_is_refused_on_the_head_naming_the_run_that_holds_it_and_passed_over_elsewhere():
    answer = {"attach": None, "status": None, "lease": OTHER}
    refused = attachment("h", True, "r1", answer, "watch")
    assert refused == {
        "failed": True,
        "msg": "no run r1 was launched on h: the node is held by " + OTHER["line"],
    }
    assert attachment("h", True, "r1", {"attach": None, "lease": None}, "watch")["msg"].endswith("the node is free")
    elsewhere = attachment("n1", False, "r1", answer, "watch")
    assert not elsewhere.get("failed") and elsewhere["launch"] == {} and elsewhere["state"] == "absent"


def test_a_stop_refuses_a_wrong_id_on_the_head_and_says_a_finished_run_is_over():
    ended = {"attach": KEPT, "status": {"finished": True, "outcome": "ok", "reason": ""}, "lease": None}
    assert attachment("h", True, "r1", ended, "stop") == {
        "changed": False,
        "state": "finished",
        "line": "run r1 already ended on h (ok): nothing to stop; the node is free",
        "run_id": "r1",
    }
    # A wrong id: the node says who holds it; stop_record refuses once every node has answered.
    wrong = attachment("h", True, "r1", {"attach": None, "status": None, "lease": OTHER}, "stop")
    assert not wrong.get("failed") and wrong["state"] == "absent"
    assert wrong["holder"].startswith("the node is held by run r9")
    # Asked and waited for: the status read after the wait says finished, the lease is gone, and
    # that is this stop's doing, not a run that had already ended.
    stopped = {"state": "finished", "finished": True, "outcome": "failed", "reason": "stopped from the controller: x"}
    answer = {"attach": KEPT, "status": stopped, "lease": None, "asked_head": True, "waited_s": 12.5}
    assert attachment("h", True, "r1", answer, "stop") == {
        "changed": True,
        "state": "finished",
        "outcome": "failed",
        "reason": "stopped from the controller: x",
        "asked_head": True,
        "waited_s": 12.5,
        "run_id": "r1",
        "node_rank": 2,
    }
    # A worker never refuses: the head's line is the one the user sees.
    assert not attachment("n1", False, "r1", ended, "stop").get("failed")


def test_a_stop_by_a_campaigns_id_answers_for_the_group_run_on_each_node():
    group = {"run_id": "c7-k2-g1", "live": True, "line": "run c7-k2-g1 (owner me@ctl, lease until ...)"}
    running = {"attach": KEPT, "status": {"state": "running"}, "lease": group, "run_id": "c7-k2-g1", "asked_head": True}
    # The cluster file's head runs in a group: the group's run and its rank there, for the teardown.
    done = attachment("h", True, "c7", running, "stop")
    assert done["run_id"] == "c7-k2-g1" and done["node_rank"] == 2 and done["asked_head"] and not done.get("failed")
    # It sat this rung out: its last group run ended; no refusal, no "already ended" line of that run.
    ended = {"attach": KEPT, "status": {"state": "finished", "finished": True}, "lease": None, "run_id": "c7-k1-g0"}
    sat_out = attachment("h", True, "c7", ended, "stop")
    assert sat_out["state"] == "finished" and "line" not in sat_out and not sat_out.get("failed")
    # A rank the launch did not keep: left to the cluster file's (the teardown's default).
    assert "node_rank" not in attachment("n1", False, "c7", dict(running, attach=None), "stop")
    # The head that no group of the campaign reached yet: not refused here (stop_record judges every node).
    never = attachment("h", True, "c7", {"attach": None, "status": None, "lease": None, "run_id": "c7"}, "stop")
    assert not never.get("failed") and never["state"] == "absent" and never["holder"] == "the node is free"


def test_a_stop_asks_the_head_with_who_and_when_and_waits_to_the_supervisors_stop_bound():
    asked = stop_args(30, "me@ctl (ansible-playbook pid 7)", dt.datetime(2026, 12, 6, 11, 0, 5, tzinfo=dt.timezone.utc))
    assert (
        asked["stop_reason"]
        == "stopped by aorta.cluster.stop from me@ctl (ansible-playbook pid 7) at 2026-12-06 11:00:05 UTC"
    )
    assert asked["wait_seconds"] == int(_time_bounds.stop_bound_s(30, 0) + 2 * _time_bounds.HEARTBEAT_S)
    assert asked["grace_seconds"] == 30
    assert stop_args(10, "x", dt.datetime.now(dt.timezone.utc))["wait_seconds"] < asked["wait_seconds"]


def test_a_supervisor_that_ran_without_a_readable_kept_launch_fails_rather_than_be_ended():
    # Launched by another account (the kept launch is 0600), or by a collection before this one: taken
    # for excluded or absent, its end would remove the run's container while it trains.
    answer = {"attach": None, "attach_error": "unreadable here (Permission denied)", "status": {"state": "running"}}
    for lease in (OURS, None):
        done = attachment("n2", False, "r1", dict(answer, lease=lease), "watch")
        assert done == {
            "failed": True,
            "msg": "run r1 ran on n2 (running), but runs/r1.attach.json is unreadable here (Permission denied): "
            "re-attach as the account that launched it, or stop it with aorta.cluster.stop",
        }
    missing = attachment("n2", False, "r1", {"attach": None, "status": {"state": "finished"}, "lease": None}, "watch")
    assert missing["failed"] and "runs/r1.attach.json is missing" in missing["msg"]
    # A stop needs no kept launch: it asks the head and waits.
    assert not attachment("n2", False, "r1", dict(answer, lease=OURS), "stop").get("failed")


def test_a_node_the_controller_cannot_reach_is_ended_as_unreachable_not_failed():
    # With any_errors_fatal, a failed (or unreachable) node would end every node's watch: the node that
    # died with the controller is the case a re-attached watch is for.
    task = SimpleNamespace(args={}, async_val=0, check_mode=False, action="aorta.cluster.run_attach")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None), set_option=lambda *a, **k: None)
    action = ActionModule(task, connection, SimpleNamespace(check_mode=False), None, None)
    action._templar = SimpleNamespace(template=lambda value: value)

    def gone(**_kwargs):
        raise AnsibleConnectionFailure("ssh: connect to host n2 port 22: No route to host")

    action._execute_module = gone
    task_vars = {
        "inventory_hostname": "n2",
        "aorta_run_id_resolved": "r1",
        "aorta_lease_dir": "/var/tmp/aorta-cluster",
        "aorta_connect_timeout": 5,
        "aorta_kill_grace_seconds": 30,
        "groups": {"aorta_head": ["h"], "aorta_nodes": ["h", "n2"]},
    }
    done = action.run(task_vars=task_vars)
    assert not done.get("failed") and done["state"] == "unreachable" and done["prepare"] == {"reached": False}
    assert done["launch"]["unreachable"].startswith("n2: ssh: connect to host n2")
    task.args = {"purpose": "stop"}
    stopped = action.run(task_vars=task_vars)
    assert not stopped.get("failed") and stopped["state"] == "unreachable" and stopped["asked_head"] is False


def test_a_watch_records_nothing_of_a_run_no_node_that_answered_holds():
    """With the head unreachable, nothing refuses an id it never ran: the confirm step does, naming
    the nodes not reached (five, then a count), unless some node that answered holds the run."""
    assert unconfirmed("r1", {"h": "unreachable", "n1": "running", "n2": "absent"}) == ""
    assert unconfirmed("r1", {"h": "unreachable", "n1": "excluded"}) == ""  # held by the run
    assert unconfirmed("r1", {"h": "unreachable", "n1": "absent"}) == (
        "watch: run r1: no node that answered holds it (1 of 2 nodes not reached: h); nothing recorded. "
        "Check -e aorta_run_id, or watch again once they answer"
    )
    every = unconfirmed("r1", {f"n{i}": "unreachable" for i in range(1000)})
    assert "(1000 of 1000 nodes not reached: n0, n1, n2, n3, n4 and 995 more)" in every and len(every) < 300
