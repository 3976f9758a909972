#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: run_supervisor
short_description: Run one node's share of a run under the node's own deadline
version_added: 0.1.0
description:
  - "Starts the launch command in the run's container and supervises it on the node, so that the
    run ends the same way whether or not the controller is still there: the deadline is kept on the
    node's monotonic clock; at the deadline the diagnostics capture runs (bounded: every rank's
    Python stack with py-spy and its flight-recorder dump, see O(diagnostics_dir)); then SIGTERM
    is sent to every process in the container, then SIGKILL after the grace period; the files the
    container's root wrote are handed back to the SSH user; the container is removed; the node's
    lease is released; the node's kernel log over the run is scanned for GPU, driver and fabric
    trouble (C(status.node_errors))."
  - "It runs for the whole run: give it O(detach) (the module returns once the supervisor holds the
    lease and, on the head, serves the aggregator; the supervisor goes on in its own session), or
    start it with C(async) and C(poll: 0). While it runs it keeps a status file (state, per-rank
    steps, times, exit code) that it replaces atomically; the action plugin
    M(aorta.cluster.run_wait) reads it."
  - "With O(start) the same module run starts the container first (as M(aorta.cluster.run_container)
    does), so that one remote command launches the node."
  - "It renews the node's lease (M(aorta.cluster.node_lease)) with its own process and the run's
    deadline plus grace, so the lease expires as soon as the supervisor is gone. It refuses to start
    when another run holds the node."
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  run_id:
    description: The run this node belongs to (names the lease and the status file).
    type: str
    required: true
  container:
    description: The run's container on this node, already running.
    type: str
    required: true
  command:
    description: The command run inside the container with C(docker exec); its exit code is the node's outcome.
    type: list
    elements: str
    required: true
  script:
    description: Written to O(script_path) (mode 0755) before the command starts, for example the launch script it runs.
    type: str
  script_path:
    description: Host path of O(script).
    type: path
  timeout_seconds:
    description: The run's deadline, counted from the start of the command.
    type: int
    required: true
  grace_seconds:
    description: Seconds between SIGTERM and SIGKILL, so profilers can flush their traces.
    type: int
    default: 30
  directory:
    description: Node-local directory of the lease and of the status file C(runs/<run_id>.json).
    type: path
    default: /var/tmp/aorta-cluster
  log:
    description: Host path of the node's log (written by the command); its tail is returned.
    type: path
  progress_dir:
    description:
      - Host directory holding the ranks' C(rank_<rr>_metrics.jsonl) files (one line per step).
      - Its file system's free space is read with every progress read (C(status.disk), lowest seen).
    type: path
  ranks:
    description: This node's global ranks (a rank without a metrics file has recorded 0 steps).
    type: list
    elements: int
    default: []
  diagnostics_dir:
    description:
      - Directory inside the container where the capture at the deadline writes C(rank<R>.pyspy.json)
        and C(capture.json) (put it under the collected output directory). Empty skips the capture.
    type: str
    default: ""
  pyspy_path:
    description:
      - The node's py-spy binary, copied into the container for the capture.
      - Without it only the flight recorder is asked.
    type: path
  pyspy_sha256:
    description: The sha256 O(pyspy_path) must have; another file is not run (the tools directory is shared).
    type: str
  diagnose_command:
    description: An extra command run on the node after the capture, within the same O(diagnose_seconds).
    type: list
    elements: str
    default: []
  diagnose_seconds:
    description: Upper bound of the whole diagnostics step.
    type: int
    default: 30
  fabric:
    description:
      - "When the run does not end well (at the deadline, before anything is stopped, or when the
        launch fails), check the node's fabric path: the state of O(fabric.interface) and a TCP
        connection from O(fabric.address) to O(fabric.head_address):O(fabric.head_port) (a refused
        connection counts as reached). The answer is C(status.fabric); the controller names the node
        whose link went down first. Without it nothing is checked."
    type: dict
    suboptions:
      interface:
        description: The node's fabric interface.
        type: str
        required: true
      address:
        description: The node's fabric address (the connection's source).
        type: str
        required: true
      head_address:
        description: The head's fabric address (on the head itself only its link is checked).
        type: str
        required: true
      head_port:
        description: A port on the head (the rendezvous port).
        type: int
        required: true
      timeout_seconds:
        description: How long the connection may take.
        type: float
        default: 3
  watch:
    description:
      - "The head watches the run. On the head (O(watch.nodes) given) the supervisor serves an
        aggregator on O(watch.head_address):O(watch.port) over UDP (the fabric address only; the
        rendezvous port's number, whose TCP side torchrun uses) until every node has ended. Every
        node's supervisor reports to it every few seconds (state, steps per rank, exit code, free
        disk) and gets C(stop) in the answer. A worker launches nothing until the aggregator has
        answered (else its launch fails with a fabric message)."
      - "A node that reports a failure, or whose reports stop for O(watch.heartbeat_timeout) seconds,
        makes the head stop every node (capture, SIGTERM, grace, SIGKILL); a worker that hears nothing
        from the head for as long stops itself. C(status.cluster_stop) names the node it was about
        (C(node), C(kind), C(reason), C(by)). Messages carry an HMAC-SHA256 keyed by O(watch.secret); forged,
        replayed, oversized or non-JSON ones change nothing."
      - Without it the node runs on its own deadline alone.
    type: dict
    suboptions:
      node:
        description: This node's name (its inventory name).
        type: str
        required: true
      head:
        description: The head's name.
        type: str
        required: true
      nodes:
        description: On the head only, every node's name, the head first. Empty on a worker.
        type: list
        elements: str
        default: []
      head_address:
        description: The head's fabric address.
        type: str
        required: true
      port:
        description: The UDP port on O(watch.head_address).
        type: int
        required: true
      secret:
        description: The run's secret (hex), the same on every node. Never logged or written.
        type: str
        required: true
      heartbeat_seconds:
        description: How often the node reports.
        type: float
        default: 3
      heartbeat_timeout:
        description: Silence after which the head stops the run (or a worker stops itself).
        type: float
        default: 30
      join_timeout:
        description: How long a worker waits for the aggregator's first answer, and the head for each
          node's first report.
        type: float
        default: 120
      stopping_timeout:
        description: Silence allowed to a node that said it is stopping (capture, grace, kill, cleanup).
        type: float
        default: 330
      orphan_grace:
        description:
          - On the head, seconds after which it stops every node once no controller has watched the run
            (the watch's poll touches C(aggregates/<run_id>.watched)), counted from its launch; 0 never.
        type: float
        default: 0
      sweep:
        description:
          - "The fabric sweep between every node's join and the head's go (no rank has started): in each
            of up to 3 rounds every node sends to one node and receives from another over the fabric
            at once, on a TCP port it reserved on O(watch.sweep.address) and listens on only during the
            sweep, accepting only peers that prove the run's secret (perftest, which has no authentication
            of its own, listens for its round's seconds only). The head judges the figures and
            names a node below O(watch.sweep.threshold) x its rounds' median in every round
            (C(status.fabric_sweep)); with O(watch.sweep.min_gbps), a node below it stops the run
            before its ranks start."
          - Omitted, or O(watch.sweep.seconds) 0, no sweep.
        type: dict
        suboptions:
          address:
            description: This node's fabric address, where its sweep port is bound.
            type: str
            required: true
          seconds:
            description: The sweep's length, all rounds together, whatever the node count.
            type: float
            default: 10
          tool:
            description:
              - V(tcp) over the fabric address; V(perftest) (C(ib_write_bw)), refused where it is not
                installed or no RDMA device is; V(auto) perftest where every node can run it, else tcp.
            type: str
            default: auto
            choices: [auto, perftest, tcp]
          threshold:
            description: On the head, the fraction of the median below which a node is named slow.
            type: float
            default: 0.5
          min_gbps:
            description: On the head, a node below this many Gbit/s stops the run before it starts; 0 never.
            type: float
            default: 0
  kernel_log:
    description: Scan the node's kernel log (C(journalctl -k), else C(dmesg)) between the run's start and end.
    type: bool
    default: true
  chown_paths:
    description:
      - Paths inside the container handed back to the SSH user before the container is removed
        (the container runs as root). Skipped when the SSH user is root.
    type: list
    elements: str
    default: []
  remove_container:
    description: Remove the container (with its anonymous volumes) when the workload has ended.
    type: bool
    default: true
  docker:
    description: The docker command.
    type: str
    default: docker
  start:
    description:
      - Start the container O(container) first, as M(aorta.cluster.run_container) does with the same
        options (the same container's name and O(docker)). Its result is C(started).
    type: dict
    suboptions:
      run_argv:
        description: The whole C(docker run -d ...) argv.
        type: list
        elements: str
        required: true
      run_dir:
        description: The node's run directory on the host, created as the SSH user.
        type: path
        required: true
      mount_source:
        description: The host directory bind-mounted into the container (named in messages).
        type: path
        required: true
      writable:
        description: Directories inside the container its root must be able to write (created).
        type: list
        elements: str
        default: []
      floor_dir:
        description:
          - A directory of O(start.writable), as a pair C(container)/C(host) path, whose clock gives
            the start floor.
        type: dict
      build:
        description: A command run inside the container before launch (an empty list skips it).
        type: list
        elements: str
        default: []
  attach:
    description:
      - "What a watch re-attached to this run from another controller needs (the controller's launch and probe
        results of this node, M(aorta.cluster.run_attach) reads them back): written, with the supervisor's
        process id, to C(runs/<run_id>.attach.json) in O(directory) (mode 0600) once the supervisor holds the
        node's lease."
    type: dict
  detach:
    description:
      - "Return as soon as the supervisor has taken the node's lease (and, on the head, serves the
        aggregator); the supervisor goes on in a process of its own (a new session, its standard
        streams away from the module's), so neither the module's end nor the SSH connection's ends
        it. Anything it prints, a traceback included, goes to C(runs/<run_id>.supervisor.log) in
        O(directory)."
      - Without it the module returns when the run has ended, with C(status).
    type: bool
    default: false
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing runs; the module returns what it would run.
  diff_mode:
    support: none
notes:
  - "Under C(async) instead of O(detach), give the task the C(async_s) of the run's deadlines
    (M(aorta.cluster.node_launch) returns them as RV(aorta.cluster.node_launch#module:deadlines); computed by
    plugins/module_utils/node_runtime/_time_bounds.py: the deadline, the diagnostics, the grace, the kill wait and the
    clean-up, plus the controller's wait and a margin): Ansible's async wrapper kills its job at that limit."
"""

EXAMPLES = r"""
- name: Launch on every node at once
  aorta.cluster.run_supervisor:
    run_id: "{{ aorta_run_id_resolved }}"
    container: "aorta-benchmark-{{ aorta_run_id_resolved }}"
    command: [bash, /mnt/.aorta-cluster/run1/node_0/launch.sh]
    timeout_seconds: 3600
    grace_seconds: 30
    log: /home/me/aorta/.aorta-cluster/run1/node_0/node.log
    progress_dir: /home/me/aorta/aorta_runs/run1
    ranks: [0, 1, 2, 3, 4, 5, 6, 7]
    start:
      run_argv: "{{ aorta_docker_run_argv }}"
      run_dir: /home/me/aorta/.aorta-cluster/run1/node_0
      mount_source: /home/me/aorta
    detach: true
  register: aorta_job
"""

RETURN = r"""
status:
  description:
    - The final status record, as in the status file. Keys include C(state) (V(finished)),
      C(outcome) (V(ok), V(failed) or V(timeout)), C(rc), C(timed_out), C(reason), C(progress)
      (steps per global rank), C(events) (what happened when), C(log_tail), C(cleanup),
      C(started_at), C(deadline_at), C(ended_at) (node wall clock), C(capture_s) (after a
      deadline), C(capture_note), C(node_errors) (C(source), C(error), C(lines) of C(at), C(kind), C(line)),
      C(fabric) (when the run did not end well and O(fabric) was given; keys C(interface), C(operstate),
      C(carrier), C(link_up), C(head), C(head_reached), C(error), C(ok), C(at)) and C(disk) (with
      O(progress_dir); keys C(path), C(free_bytes), C(total_bytes), C(lowest_free_bytes) seen during the run),
      C(link) (with O(fabric), the fabric interface's error counters C(rx_errors) and C(tx_errors) at the launch
      (C(start)) and at the end (C(end)), and C(grew), those that grew during the run),
      C(watch) (V(head) or V(worker), with O(watch)) and C(cluster_stop) (when the head stopped the run, or the
      node stopped itself for a silent head; keys C(node) it was about, C(kind) (V(fabric) for a node below
      O(watch.sweep.min_gbps)), C(reason), C(by)) and C(silent_nodes)
      (on the head, the nodes it counted as gone, with why), C(fabric_sweep) (with O(watch.sweep), once the
      sweep ran; keys C(tool), C(rounds) (this node's own figures per round), C(send_gbps), C(recv_gbps),
      C(send_ratio), C(recv_ratio), C(ratio), C(median_gbps), C(slow), C(took_s), C(error) where the sweep
      failed on this node, and on the head C(cluster), the head's judgement of every node's figures).
  returned: success, without O(detach)
  type: dict
started:
  description: With O(start), the container's start (C(container_id), C(start_floor), C(removed_same_name)).
  returned: success and O(start) given
  type: dict
pid:
  description: With O(detach), the supervisor's process id on the node (the lease's holder).
  returned: success and O(detach)
  type: int
status_path:
  description: The status file on the node.
  returned: always
  type: str
  sample: /var/tmp/aorta-cluster/runs/20261201T101500-a1b2c3.json
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._capture import capture_argvs
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._container import OPTIONS as START_OPTIONS
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._container import ContainerError
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._container import start as start_container
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import (
    shared_dir,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._supervised import (
    Refused,
    detach,
    prepare,
    supervise,
    write_attach,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._supervisor import (
    status_path,
)
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._time_bounds import (
    DIAGNOSE_S,
    HEARTBEAT_S,
)


def _argument_spec():
    """The module's options (documented in DOCUMENTATION above)."""
    return {
        "run_id": {"type": "str", "required": True},
        "container": {"type": "str", "required": True},
        "command": {"type": "list", "elements": "str", "required": True},
        "script": {"type": "str"},
        "script_path": {"type": "path"},
        "timeout_seconds": {"type": "int", "required": True},
        "grace_seconds": {"type": "int", "default": 30},
        "directory": {"type": "path", "default": "/var/tmp/aorta-cluster"},
        "log": {"type": "path"},
        "progress_dir": {"type": "path"},
        "ranks": {"type": "list", "elements": "int", "default": []},
        "diagnostics_dir": {"type": "str", "default": ""},
        "pyspy_path": {"type": "path"},
        "pyspy_sha256": {"type": "str"},
        "diagnose_command": {"type": "list", "elements": "str", "default": []},
        "diagnose_seconds": {"type": "int", "default": DIAGNOSE_S},
        "fabric": {
            "type": "dict",
            "options": {
                "interface": {"type": "str", "required": True},
                "address": {"type": "str", "required": True},
                "head_address": {"type": "str", "required": True},
                "head_port": {"type": "int", "required": True},
                "timeout_seconds": {"type": "float", "default": 3},
            },
        },
        "watch": {
            "type": "dict",
            "options": {
                "node": {"type": "str", "required": True},
                "head": {"type": "str", "required": True},
                "nodes": {"type": "list", "elements": "str", "default": []},
                "head_address": {"type": "str", "required": True},
                "port": {"type": "int", "required": True},
                "secret": {"type": "str", "required": True, "no_log": True},
                "heartbeat_seconds": {"type": "float", "default": HEARTBEAT_S},
                "heartbeat_timeout": {"type": "float", "default": 30},
                "join_timeout": {"type": "float", "default": 120},
                "stopping_timeout": {"type": "float", "default": 330},
                "orphan_grace": {"type": "float", "default": 0},
                "sweep": {
                    "type": "dict",
                    "options": {
                        "address": {"type": "str", "required": True},
                        "seconds": {"type": "float", "default": 10},
                        "tool": {"type": "str", "default": "auto", "choices": ["auto", "perftest", "tcp"]},
                        "threshold": {"type": "float", "default": 0.5},
                        "min_gbps": {"type": "float", "default": 0},
                    },
                },
            },
        },
        "kernel_log": {"type": "bool", "default": True},
        "chown_paths": {"type": "list", "elements": "str", "default": []},
        "remove_container": {"type": "bool", "default": True},
        "docker": {"type": "str", "default": "docker"},
        "start": {"type": "dict", "options": START_OPTIONS},
        "attach": {"type": "dict"},
        "detach": {"type": "bool", "default": False},
    }


def _commands(p):
    """The launch argv, the cleanup argvs, the diagnostics capture's argvs and its note."""
    docker, container = p["docker"], p["container"]
    launch = [docker, "exec", container] + p["command"]
    cleanup = []
    uid, gid = os.getuid(), os.getgid()
    if p["chown_paths"] and uid != 0:
        cleanup.append([docker, "exec", container, "chown", "-R", f"{uid}:{gid}"] + p["chown_paths"])
    if p["remove_container"]:
        cleanup.append([docker, "rm", "-f", "-v", container])
    diagnose, capture_note = [], ""
    if p["diagnostics_dir"]:
        # The capture script gets the budget less what docker cp and docker exec's start take.
        diagnose, capture_note = capture_argvs(
            docker,
            container,
            p["diagnostics_dir"],
            max(1, p["diagnose_seconds"] - 5),
            p["pyspy_path"],
            p["pyspy_sha256"],
        )
    if p["diagnose_command"]:
        diagnose.append(p["diagnose_command"])
    return launch, cleanup, diagnose, capture_note


def _start_container(module, p, path):
    """With O(start), the container started (fails the module if it cannot be); the result's extra keys."""
    extra = {}
    if p["start"]:
        q = p["start"]
        try:
            extra["started"] = start_container(
                module.run_command,
                p["docker"],
                p["container"],
                q["run_argv"],
                q["run_dir"],
                q["mount_source"],
                q["writable"],
                q["floor_dir"],
                q["build"],
            )
        except ContainerError as exc:
            module.fail_json(msg=str(exc), status_path=path, **exc.extra)
    return extra


def _write_script(module, p, path):
    """O(script) written to O(script_path), mode 0755 (fails the module if it cannot be)."""
    if p["script_path"]:
        try:
            os.makedirs(os.path.dirname(p["script_path"]), exist_ok=True)
            with open(p["script_path"], "w") as handle:
                handle.write(p["script"])
            os.chmod(p["script_path"], 0o755)
        except OSError as exc:
            module.fail_json(msg=f"cannot write {p['script_path']}: {exc.strerror}", status_path=path)


def _supervise_attached(module, p, path, launch, cleanup, diagnose, capture_note, extra):
    """Without O(detach): the run supervised in this module run, to its end; exits the module."""
    try:
        supervisor, lease = prepare(p, path, launch, cleanup, diagnose, capture_note)
    except Refused as exc:
        module.fail_json(msg=str(exc), status_path=path, **extra)
    write_attach(p, extra)
    status = supervise(supervisor, lease, p["run_id"])
    module.exit_json(changed=True, status=status, status_path=path, **extra)


def _detached_work(p, path, launch, cleanup, diagnose, capture_note, extra):
    """What the detached process runs: prepare, report its pid (or why it refused), then supervise."""

    def work(report):
        try:
            supervisor, lease = prepare(p, path, launch, cleanup, diagnose, capture_note)
        except Refused as exc:
            report({"failed": True, "msg": str(exc)})
            return 1
        write_attach(p, extra)
        report({"pid": os.getpid()})
        supervise(supervisor, lease, p["run_id"])
        return 0

    return work


def _supervise_detached(module, p, path, work, extra):
    """With O(detach): ``work`` started in a process of its own; exits the module with its pid or why not."""
    try:
        shared_dir(p["directory"])
        shared_dir(os.path.dirname(path))
    except OSError as exc:
        module.fail_json(msg=f"cannot take the node's lease: {exc}", status_path=path, **extra)
    log_path = os.path.join(os.path.dirname(path), f"{p['run_id']}.supervisor.log")
    answer = detach(work, log_path)
    if answer is None:
        module.fail_json(
            msg=f"the supervisor ended before it started: see {log_path} on the node", status_path=path, **extra
        )
    if answer.get("failed"):
        module.fail_json(msg=answer.get("msg", "the supervisor did not start"), status_path=path, **extra)
    module.exit_json(changed=True, pid=answer.get("pid"), status_path=path, **extra)


def main() -> None:
    module = AnsibleModule(
        argument_spec=_argument_spec(),
        supports_check_mode=True,
        required_together=[("script", "script_path")],
    )
    p = module.params
    if p["timeout_seconds"] <= 0 or p["grace_seconds"] < 0:
        module.fail_json(msg="timeout_seconds must be > 0 and grace_seconds >= 0")
    sweep = (p["watch"] or {}).get("sweep") or {}
    if sweep and not (0 < sweep["threshold"] <= 1 and sweep["seconds"] >= 0 and sweep["min_gbps"] >= 0):
        module.fail_json(msg="watch.sweep: threshold must be in (0, 1], seconds and min_gbps at least 0")
    path = status_path(p["directory"], p["run_id"])
    launch, cleanup, diagnose, capture_note = _commands(p)
    if module.check_mode:
        module.exit_json(changed=False, status_path=path, command=launch, cleanup=cleanup, diagnose=diagnose)

    extra = _start_container(module, p, path)
    _write_script(module, p, path)

    if not p["detach"]:
        _supervise_attached(module, p, path, launch, cleanup, diagnose, capture_note, extra)

    work = _detached_work(p, path, launch, cleanup, diagnose, capture_note, extra)
    _supervise_detached(module, p, path, work, extra)


if __name__ == "__main__":
    main()
