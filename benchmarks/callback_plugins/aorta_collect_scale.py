# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark helper for bench_collect_scale.py: JSON lines into the file named by
AORTA_COLLECT_SCALE_LOG.

- ``task``: at every task's start, the wall time and ansible-playbook's main process's own CPU
  (callbacks run in the main process), read twice around the optional counter read below so that
  the read is outside any window measured between two task starts (``cpu`` before it, ``cpu_after``
  after it).
- ``result``: per task result of the actions in ACTIONS, its host, status, start and end; for
  ``aorta.cluster.node_end`` also ``size``, the JSON size of the result (``len(json.dumps(...))``).
- ``stats``: the same two readings once the play is over.

With AORTA_COLLECT_SCALE_NET naming a JSON file of ``[[pid, interface], ...]`` (one of each node's
container processes and its management interface), each ``task`` and ``stats`` line also carries
``tx``: the bytes those interfaces sent, summed (read through /proc/<pid>/root/sys/class/net, the
node's own network namespace). The callback's own CPU inside the results (the JSON sizes and the
writes) is counted in ``own_cpu`` on each line, so that it can be taken out of a window."""

from __future__ import annotations

import json
import os
import time

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: aorta_collect_scale
type: aggregate
short_description: Task starts with the main process's CPU, node_end result sizes (benchmarks only)
description: Writes to the file named by the environment variable AORTA_COLLECT_SCALE_LOG.
"""

ACTIONS = ("aorta.cluster.node_end", "aorta.cluster.trace_parse", "aorta.cluster.trace_pull")
SIZED = "aorta.cluster.node_end"


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "aorta_collect_scale"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("AORTA_COLLECT_SCALE_LOG")
        self._net = []
        net = os.environ.get("AORTA_COLLECT_SCALE_NET")
        if net:
            with open(net) as handle:
                self._net = [(int(pid), str(iface)) for pid, iface in json.load(handle)]
        self._started = {}
        self._own_cpu = 0.0

    def _tx(self):
        if not self._net:
            return None
        total = 0
        for pid, iface in self._net:
            try:
                with open(f"/proc/{pid}/root/sys/class/net/{iface}/statistics/tx_bytes") as handle:
                    total += int(handle.read())
            except (OSError, ValueError):
                return None  # a node gone: no figure rather than a wrong one
        return total

    def _write(self, record):
        if self._path:
            with open(self._path, "a") as handle:
                handle.write(json.dumps(record) + "\n")

    def _mark(self, kind, **fields):
        cpu = _cpu()
        wall = time.time()
        tx = self._tx()
        self._write(dict(fields, kind=kind, t=wall, cpu=cpu, cpu_after=_cpu(), tx=tx, own_cpu=self._own_cpu))

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._mark("task", task=task.get_name(), action=task.action)

    def v2_playbook_on_stats(self, stats):
        self._mark("stats")

    def v2_runner_on_start(self, host, task):
        if task.action in ACTIONS:
            self._started[(host.get_name(), task._uuid)] = time.time()

    def _result(self, result, status):
        task = result._task
        if task.action not in ACTIONS:
            return
        began = _cpu()
        host = result._host.get_name()
        record = {
            "kind": "result",
            "host": host,
            "task": task.get_name(),
            "action": task.action,
            "status": status,
            "start": self._started.pop((host, task._uuid), None),
            "end": time.time(),
        }
        if task.action == SIZED:
            record["size"] = len(json.dumps(result._result, cls=AnsibleJSONEncoder))
        self._write(record)
        self._own_cpu += _cpu() - began

    def v2_runner_on_ok(self, result):
        self._result(result, "skipped" if result._result.get("skipped") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")
