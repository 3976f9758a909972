# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Launch filters; documentation lives in the sidecar ``<filter>.yml`` files beside this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.aorta.cluster.plugins.plugin_utils import (
    _cluster_file,
    _container,
    _health_verdict,
    _launch,
    _plan,
    _run,
    _run_context,
)


def _filter(func):
    """Turn the pure function's LaunchError into the error Ansible shows as a task failure."""

    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except _launch.LaunchError as exc:
            raise AnsibleFilterError(str(exc)) from None

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


class FilterModule:
    def filters(self):
        return {
            "master_addr": _filter(_launch.master_addr),
            "launch_mode": _filter(_launch.launch_mode),
            "config_output_dir": _filter(_launch.config_output_dir),
            "torchrun_argv": _filter(_launch.torchrun_argv),
            "launch_script": _filter(_launch.launch_script),
            "base_env": _filter(_launch.base_env),
            "docker_run_argv": _filter(_container.docker_run_argv),
            "node_state": _filter(_run.node_state),
            "run_status": _filter(_run.run_status),
            "node_line": _filter(_run.node_line),
            "node_table": _filter(_run.node_table),
            "torchrun_failure": _filter(_run.torchrun_failure),
            "launch_deadlines": _filter(_plan.launch_deadlines),
            "partial_cluster": _filter(_cluster_file.partial_cluster),
            "setup_failure": _filter(_run.setup_failure),
            "run_settings": _filter(_run_context.run_settings),
            "health_record": _filter(_health_verdict.health_record),
            "healthy_cluster": _filter(_cluster_file.healthy_cluster),
        }
