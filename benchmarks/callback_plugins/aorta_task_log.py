# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark helper: one JSON line per task result per host (name, action, delegation, status,
start and end times) into the file named by AORTA_TASK_LOG. Used by bench_scale.py to count the
module runs each node took before its ranks started."""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: aorta_task_log
type: aggregate
short_description: Log every task result per host as JSON lines (benchmarks only)
description: Writes to the file named by the environment variable AORTA_TASK_LOG.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "aorta_task_log"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("AORTA_TASK_LOG")
        self._started = {}

    def v2_runner_on_start(self, host, task):
        self._started[(host.get_name(), task._uuid)] = time.time()

    def _log(self, result, status):
        if not self._path:
            return
        host, task = result._host.get_name(), result._task
        record = {
            "host": host,
            "task": task.get_name(),
            "action": task.action,
            # Where a delegated task really ran (localhost, or another node such as the head).
            "delegate_to": (result._result.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
            if task.delegate_to
            else None,
            "status": status,
            "start": self._started.pop((host, task._uuid), None),
            "end": time.time(),
            # Remote commands a wait made (run_watch, run_wait: one per poll).
            "polls": result._result.get("polls"),
            # Where a node's end went (node_end: wait, teardown, collect).
            "seconds": result._result.get("seconds"),
        }
        with open(self._path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def v2_runner_on_ok(self, result):
        self._log(result, "skipped" if result._result.get("skipped") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._log(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._log(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._log(result, "unreachable")
