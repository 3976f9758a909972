# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of aorta.cluster.node_prepare (documented in plugins/modules/node_prepare.py)."""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.utils.display import Display

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _time_bounds
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._probe import PULL_ANSWER_S
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._cluster_file import partial_cluster
from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster._preflight import archive_images, message
from ansible_collections.aorta.cluster.plugins.plugin_utils.collect import _collect_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.config import _settings
from ansible_collections.aorta.cluster.plugins.plugin_utils.config._vocabulary import READ_BY
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError, launch_mode
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._plan import run_head
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._tools import pyspy_plan
from ansible_collections.aorta.cluster.plugins.plugin_utils.results._node_results import shorten_failure
from ansible_collections.aorta.cluster.plugins.plugin_utils.steps._node_work import NodeProbe

display = Display()

# The variables this step reads: the role preflight's, in roles/variables.yml.
NAMES = READ_BY["preflight"]


EXCLUDED_NAMES = ("aorta_run_id_resolved", "aorta_results_dir_resolved")
# What a shortened failed result keeps for the readers of the registered result itself (the
# teardown's ``reached``, the rescue's ``own``; plugins/modules/node_prepare.py documents both).
SHORT_KEEP = ("own", "reached")


def health_bound(s: dict[str, Any]) -> float:
    """The longest the health checks can take on one node (``_time_bounds.health_bound_s``, which the
    prepare task's timeout counts too)."""
    return _time_bounds.health_bound_s(s["aorta_health_step_timeout"], s["aorta_health_checks"])


def head_file(results_dir: str) -> str:
    return os.path.join(_settings.plan_dir(results_dir), "head.json")


def candidate_file(results_dir: str, node: str) -> str:
    """A worker's own verdict as the head's stand-in, when the head failed with aorta_exclude_unhealthy."""
    return os.path.join(_settings.plan_dir(results_dir), f"candidate-{node.replace('/', '_')}.json")


def excluded_file(results_dir: str, node: str) -> str:
    """A node preflight left out of the run (aorta_exclude_unhealthy), with why."""
    return os.path.join(_settings.plan_dir(results_dir), f"excluded-{node.replace('/', '_')}.json")


def excluded_nodes(results_dir: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Every node this run's preflight excluded, by name: one directory listing and a file per excluded
    node, where reading every node's registered result from every node was N squared over the launch."""
    try:
        names = os.listdir(_settings.plan_dir(results_dir))
    except OSError:
        return {}
    found = {}
    for name in names:
        if name.startswith("excluded-") and name.endswith(".json"):
            seen = _settings.wait_json(os.path.join(_settings.plan_dir(results_dir), name), 0, run_id=run_id)
            if seen and seen.get("node"):
                found[str(seen["node"])] = seen
    return found


def connect_args(s: dict[str, Any], head: str, seen: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A worker's one TCP connection to the head's address and port from ``seen`` (the head's
    verdict), from its own address on the interface gloo will use; and what the judgement names."""
    gloo = (s["aorta_extra_env"] or {}).get("GLOO_SOCKET_IFNAME", "")
    connect = {
        "host": seen["address"],
        "port": int(seen["port"]),
        "source": s["aorta_vpc_ip"],
        "interface": str(gloo).split(",", maxsplit=1)[0].lstrip("^="),
        "timeout": float(s["aorta_fabric_check_timeout"]),
    }
    return connect, {"head": head, "head_port": int(seen["port"]), "head_address": seen["address"]}


def exclude(result: dict[str, Any]) -> dict[str, Any]:
    """With aorta_exclude_unhealthy, a node's own preflight failure leaves it out of the run instead
    of stopping the run: the result is not failed, and says ``excluded`` with the reasons."""
    if result.get("failed") and result.get("own", True):
        result["failures"] = result.get("failures") or [str(result.get("msg", "preflight failed"))]
        result.update(failed=False, excluded=True)
    return result


def _collect_mode(s: dict[str, Any], task_vars: dict[str, Any]) -> str:
    """aorta_collect_traces' mode for the cluster's node count."""
    return _collect_plan.of_run(s, len((task_vars.get("groups") or {}).get("aorta_nodes") or [1]))[0]


class ActionModule(NodeProbe):
    _VALID_ARGS: frozenset[str] = frozenset()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        # Preflight reads the node and holds it for this run (a lease its end releases): nothing the
        # run leaves behind, so "ok", which the console does not print per node (display_ok_hosts).
        result = self._run(tmp, task_vars)
        result["changed"] = False
        if result.get("excluded"):
            s = {k: self._templar.template((task_vars or {}).get(k)) for k in EXCLUDED_NAMES}
            _settings.write_json(
                excluded_file(str(s["aorta_results_dir_resolved"]), str((task_vars or {}).get("inventory_hostname"))),
                {
                    "run_id": s["aorta_run_id_resolved"],
                    "node": (task_vars or {}).get("inventory_hostname"),
                    "excluded": True,
                    "failures": result.get("failures") or [],
                    "msg": result.get("msg", ""),
                },
            )
        return self._short(result, task_vars or {})

    def _short(self, result: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """A failed result, printed whole by the console (some 4,000 characters with the probe's
        facts), shortened to one line under _run.MESSAGE_MAX and kept whole in the results
        directory's logs/ (``_node_results.shorten_failure``; run_record reads it back). Whole under --check."""
        if not result.get("failed") or self._task.check_mode:
            return result
        try:
            results_dir = self._templar.template(task_vars.get("aorta_results_dir_resolved"))
        except AnsibleError:
            return result
        node = str(task_vars.get("inventory_hostname"))
        return shorten_failure(result, results_dir, node, "preflight", SHORT_KEEP)

    def _run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        node = str(task_vars.get("inventory_hostname"))
        head = run_head(task_vars.get("groups"), fallback=node)
        nodes = list((task_vars.get("groups") or {}).get("aorta_nodes") or [node])
        # Before any node is touched: a job that sees part of the cluster would rendezvous alone.
        first = (task_vars.get("hostvars") or {}).get(nodes[0]) or {}
        partial = partial_cluster(
            len(task_vars.get("ansible_play_hosts_all") or nodes), first.get("aorta_cluster_nodes")
        )
        if partial:
            result.update(failed=True, msg=partial, own=node == head, reached=False)
            return result
        try:
            s = _settings.read(self._templar.template, task_vars, NAMES)
            mode = launch_mode(s["aorta_master_launch_mode"], len(nodes), s["aorta_training_overrides"])
        except (_settings.SettingsError, LaunchError) as exc:
            result.update(failed=True, msg=str(exc), own=True, reached=False)
            return result
        shared = head_file(s["aorta_results_dir_resolved"])
        _settings.bound_connection(self._connection, s["aorta_connect_timeout"], s["aorta_run_id_resolved"])
        if node == head:
            pyspy = pyspy_plan(s["aorta_pyspy"], f"{str(s['aorta_lease_dir']).rstrip('/')}/tools")
            run_id = s["aorta_run_id_resolved"]
            verdict: dict[str, Any] = {"run_id": run_id, "ok": False, "msg": "the head's preflight did not finish"}
            try:
                result.update(self._prepare(s, task_vars, mode, head, pyspy, None))
                verdict = self._verdict(s, result, head, pyspy)
            finally:
                # The workers' leases wait for this (their own checks do not): of two runs started
                # together only the one that holds the head goes on to the workers (no split cluster).
                _settings.write_json(shared, verdict)
            return exclude(result) if s["aorta_exclude_unhealthy"] else result
        return self._worker(s, task_vars, mode, nodes, head, shared)

    def _worker(
        self, s: dict[str, Any], task_vars: dict[str, Any], mode: str, nodes: list[str], head: str, shared: str
    ) -> dict[str, Any]:
        """A worker's preflight: its own checks at once, beside the head's (a dead or unhealthy worker is
        named in the same pass as the head); then, once the head passed, its lease and one TCP
        connection to the head's address. The lease waits for the head: of two runs started together,
        only the one that holds the head goes on to the workers (they cannot split the cluster)."""
        node = str(task_vars.get("inventory_hostname"))
        results_dir, run_id = s["aorta_results_dir_resolved"], s["aorta_run_id_resolved"]
        checked, answer, own_expect = self._own_checks(s, task_vars, mode, read=False)
        if answer is None or checked.get("failed"):
            if s["aorta_exclude_unhealthy"]:
                # A head that failed too elects the first worker that passed: this one did not.
                _settings.write_json(candidate_file(results_dir, node), {"run_id": run_id, "ok": False})
                return exclude(checked)
            return checked
        # Bounded below the task's own timeout, so that a head that hangs is named, not this node.
        wait_s = _time_bounds.head_wait_s(
            self._task.timeout, s["aorta_connect_timeout"], s["aorta_fabric_check_timeout"], health_bound(s)
        )
        seen = _settings.wait_json(shared, wait_s, run_id=run_id)
        if not seen or not seen.get("ok") or not seen.get("port"):
            if s["aorta_exclude_unhealthy"] and seen is not None:
                return self._elect(s, task_vars, mode, nodes, head, wait_s, (answer, own_expect))
            return {
                # Not failed when the head's failure is known: the head's own failed result stops every
                # node (any_errors_fatal), and at 1000 nodes a dead head must not print 999 failures.
                "failed": seen is None,
                "own": False,
                "reached": True,
                "held": False,
                "passed_own_checks": True,
                "msg": f"{node}: passed its own checks, not held: the head {head} did not pass preflight",
            }
        held = self._hold(s, task_vars, mode, (answer, own_expect), head, seen)
        return exclude(held) if s["aorta_exclude_unhealthy"] else held

    @staticmethod
    def _verdict(s: dict[str, Any], result: dict[str, Any], head: str, pyspy: dict) -> dict[str, Any]:
        return {
            "run_id": s["aorta_run_id_resolved"],
            "head": head,
            "ok": not result.get("failed"),
            "msg": result.get("msg", ""),
            "port": result.get("port") or s["aorta_master_port"],
            "address": (result.get("derived") or {}).get("bootstrap_ip"),
            "pyspy": pyspy,
        }

    def _elect(
        self,
        s: dict[str, Any],
        task_vars: dict[str, Any],
        mode: str,
        nodes: list[str],
        head: str,
        wait_s: float,
        own: tuple[dict[str, Any], dict[str, Any]],
    ) -> dict[str, Any]:
        """The head failed and unhealthy nodes are excluded: the first worker, in cluster-file order,
        that passes its own preflight becomes the head. Each worker that passed its own checks holds
        itself as the head would (its lease, a port picked on it), says so in its candidate file, then
        waits for the workers before it: the first of them that passed is the new head, and this worker proves one TCP
        connection to it; when none passed, this worker is the head (head.json says so)."""
        node = str(task_vars.get("inventory_hostname"))
        results_dir = s["aorta_results_dir_resolved"]
        run_id = s["aorta_run_id_resolved"]
        pyspy = pyspy_plan(s["aorta_pyspy"], f"{str(s['aorta_lease_dir']).rstrip('/')}/tools")
        mine = self._hold(s, task_vars, mode, own, node, None, pyspy)
        verdict = self._verdict(s, mine, node, pyspy)
        _settings.write_json(candidate_file(results_dir, node), verdict)
        workers = [n for n in _settings.rank_order(self._templar.template, task_vars, nodes) if n != head]
        for before in workers[: workers.index(node)]:
            seen = _settings.wait_json(candidate_file(results_dir, before), wait_s, run_id=run_id)
            if seen and seen.get("ok") and seen.get("port"):
                if mine.get("failed"):
                    return exclude(mine)
                return exclude(self._connect(s, task_vars, node, mine, seen))
        if mine.get("failed"):
            return exclude(mine)
        _settings.write_json(head_file(results_dir), verdict)
        display.display(f"preflight: {node} is the run's head (the head {head} did not pass preflight)")
        mine["elected"] = True
        return mine

    def _connect(
        self, s: dict[str, Any], task_vars: dict[str, Any], node: str, mine: dict[str, Any], head: dict[str, Any]
    ) -> dict[str, Any]:
        """One TCP connection from this worker to the elected head, judged as a worker's is."""
        if self._task.check_mode:
            return mine  # as a worker's: the fabric connection is not tried in check mode
        connect, expect_head = connect_args(s, head["head"], head)
        expect = {"vpc_ip": s["aorta_vpc_ip"], "extra_env": s["aorta_extra_env"] or {}, **expect_head}
        args = {"connect": connect, "expect": expect}
        try:
            proved = self.probe(args, task_vars)
        except AnsibleConnectionFailure as exc:
            return unreachable(node, exc)
        mine.pop("port", None)  # the head's port is the run's, not this worker's candidate
        (mine.setdefault("facts", {}))["connect"] = (proved.get("facts") or {}).get("connect")
        if proved.get("failed"):
            failures = proved.get("failures") or [proved.get("msg")]
            mine.update(failed=True, msg=message(failures), failures=failures)
        return mine

    def _prepare(
        self, s: dict[str, Any], task_vars: dict[str, Any], mode: str, head: str, pyspy: dict, head_seen: dict | None
    ) -> dict[str, Any]:
        """The whole preflight in one module run: the node's own checks and its hold (the head's, or a
        worker's checked again once it had stopped another run's leftovers)."""
        node = str(task_vars.get("inventory_hostname"))
        args = self._own_args(s, task_vars, mode, read=head_seen is None)
        hold = self._hold_args(s, head, head_seen)
        args.update(hold, expect={**args["expect"], **hold["expect"]})
        try:
            probed = self.probe(args, task_vars, pyspy=pyspy)
        except AnsibleConnectionFailure as exc:
            return unreachable(node, exc)
        display.vvv(f"{node}: prepared ({'head' if head_seen is None else 'worker'})")
        return named(node, probed)

    def _own_checks(
        self, s: dict[str, Any], task_vars: dict[str, Any], mode: str, read: bool
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
        """A worker's own checks, before the head has passed: (judged, the node's answer or None when
        unreachable, what it was judged against). Nothing is held yet."""
        node = str(task_vars.get("inventory_hostname"))
        args = self._own_args(s, task_vars, mode, read)
        expect = args.pop("expect")
        try:
            answer, _none = self.execute(args, task_vars)
        except AnsibleConnectionFailure as exc:
            return unreachable(node, exc), None, expect
        return named(node, self.judged(answer, expect, task_vars)), answer, expect

    def _hold(
        self,
        s: dict[str, Any],
        task_vars: dict[str, Any],
        mode: str,
        own: tuple[dict[str, Any], dict[str, Any]],
        head: str,
        head_seen: dict | None,
        pyspy: dict | None = None,
    ) -> dict[str, Any]:
        """A worker that passed its own checks (``own``: its answer and what it was judged against),
        held for the run: its lease and tools; with ``head_seen``, one TCP connection to that head;
        without, a port picked on it as a head. Judged with the own checks' facts."""
        node = str(task_vars.get("inventory_hostname"))
        answer, own_expect = own
        hold = self._hold_args(s, head, head_seen)
        expect = {**own_expect, **hold.pop("expect")}
        if head_seen is None:
            hold.update(root=s["aorta_path"], read=s["aorta_base_config"])  # the report's copy of the config
        try:
            held, pyspy = self.execute(hold, task_vars, pyspy if pyspy is not None else (head_seen or {}).get("pyspy"))
        except AnsibleConnectionFailure as exc:
            return unreachable(node, exc)
        if held.get("failed"):
            return named(node, self.judged(held, expect, task_vars))
        lease = held.get("lease") or {}
        if lease.get("stopped") or lease.get("removed_containers"):
            # It stopped another run's leftovers, which its own checks saw (their processes, their
            # containers): checked again, whole, now that it is held.
            return self._prepare(s, task_vars, mode, head, pyspy, head_seen)
        merged = dict(answer, **{k: held[k] for k in ("lease", "port") if k in held})
        merged["_answered"] = held["_answered"]  # the clock offset from the last answer
        kept = {k: held["facts"][k] for k in ("tools", "connect", "read", "clock") if k in held["facts"]}
        merged["facts"] = {**answer["facts"], **kept}
        display.vvv(f"{node}: prepared ({'head' if head_seen is None else 'worker'})")
        return named(node, self.judged(merged, expect, task_vars, pyspy))

    def _own_args(self, s: dict[str, Any], task_vars: dict[str, Any], mode: str, read: bool) -> dict[str, Any]:
        """The node's own checks: docker, the image (pulled where missing), the checkout, the disk, the
        GPUs and their health, the fabric interface; ``read``: the run's config too (the head's, for
        the report's run context)."""
        script = s["aorta_experiment_script"] if mode == "script" else s["aorta_train_script"]
        paths = [s["aorta_base_config"], script]
        archive = str(s["aorta_image_archive"] or "")
        # Existence is the question; hashing a multi-GB image archive is not (its index is read, not its layers).
        archive_exists = bool(archive) and os.path.exists(archive)
        # Whether a node that lacks the image pulls it (missing) or fails preflight (never).
        pull = str(s["aorta_image_pull"] or "missing")
        args: dict[str, Any] = {
            "docker": "docker",
            "image": s["aorta_docker_image"],
            # Where the node lacks the image and no archive is given: pulled in the probe itself.
            "pull": {"answer_s": PULL_ANSWER_S} if not archive and pull != "never" else None,
            "root": s["aorta_path"],
            "paths": paths,
            # The health checks count the GPUs themselves (partition modes, the tool that counted).
            "count_gpus": bool(s["aorta_require_gpu"]) and not s["aorta_health_checks"],
            "read": s["aorta_base_config"] if read else "",
            "expect": {
                "image": s["aorta_docker_image"],
                "image_archive": archive,
                "archive_exists": archive_exists,
                "archive_images": archive_images(archive) if archive_exists else None,
                "image_pull": pull,
                "aorta_path": s["aorta_path"],
                "paths": paths,
                "min_free_gb": s["aorta_min_free_gb"],
                "require_gpu": bool(s["aorta_require_gpu"]),
                "gpus_needed": int(s["aorta_nproc_per_node"] or s["aorta_gpus_per_node"]),
                "vpc_ip": s["aorta_vpc_ip"],
                "extra_env": s["aorta_extra_env"] or {},
                "slow_s": float(s["aorta_gpu_tool_slow_seconds"]),
                "step_timeout": float(s["aorta_health_step_timeout"]),
                "collect": _collect_mode(s, task_vars) != "none",  # none: no trace leaves the node
            },
        }
        if s["aorta_health_checks"]:
            args["health"] = {
                "step_timeout": float(s["aorta_health_step_timeout"]),
                "allow": [str(name) for name in s["aorta_gpu_process_allow"] or []],
                "since_dir": s["aorta_lease_dir"],
                "window_s": float(s["aorta_health_kernel_window_hours"]) * 3600,
                "fabric_ip": s["aorta_vpc_ip"],
            }
        return args

    def _hold_args(self, s: dict[str, Any], head: str, head_seen: dict | None) -> dict[str, Any]:
        """What holds the node for the run: its lease and the run's tools; on the head (``head_seen``
        None) a free port picked on it, on a worker one TCP connection to the head's address (not in
        check mode). ``expect``: what the connection is judged against."""
        args: dict[str, Any] = {
            "docker": "docker",
            "pyspy": s["aorta_pyspy"],
            "lease": {
                "run_id": s["aorta_run_id_resolved"],
                "directory": s["aorta_lease_dir"],
                # Until the supervisor takes the lease over with its own process and the run's deadline.
                "expires_in": _time_bounds.setup_lease_s(int(s["aorta_setup_timeout_seconds"])),
            },
            "expect": {"vpc_ip": s["aorta_vpc_ip"], "extra_env": s["aorta_extra_env"] or {}},
        }
        if head_seen is None and not s["aorta_master_port"]:
            args["port"] = {
                "addresses": ["0.0.0.0", s["aorta_vpc_ip"]],
                "start": int(s["aorta_port_range_start"]),
                "end": int(s["aorta_port_range_end"]),
            }
        if head_seen is not None and head_seen.get("address") and not self._task.check_mode:
            connect, expect_head = connect_args(s, head, head_seen)
            args["connect"] = connect
            args["expect"].update(expect_head)
        return args


def unreachable(node: str, exc: Exception) -> dict[str, Any]:
    """Data, not Ansible's "unreachable": the node stays in the play, so that every node unreachable
    is named at once and nothing waits on it again."""
    said = " ".join(str(exc).split())  # ssh's error spans lines: one line, as every failure's
    return {"failed": True, "own": True, "reached": False, "msg": f"preflight[ssh]: unreachable: {node}: {said}"}


def named(node: str, probed: dict[str, Any]) -> dict[str, Any]:
    """A probe's judged result as preflight gives it: its own, the node reached; a failure's message
    one failure whole and how many more (every one stays in ``failures``: run.json, unhealthy.txt)."""
    probed.update(own=True, reached=True)
    if probed.get("failed") and probed.get("failures"):
        probed["msg"] = message(probed["failures"])
    if probed.get("failed") and not str(probed.get("msg", "")).startswith("preflight"):
        probed["msg"] = f"preflight: {node}: {probed.get('msg', 'failed')}"
    return probed
