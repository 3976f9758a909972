#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: run_container
short_description: Start the run's container on a node and prove it can run the job
version_added: 0.1.0
description:
  - "In one module run: removes a container of the same name, creates the node's run directory as
    the SSH user, starts the container with the given C(docker run) argv, checks it runs, proves the
    container's root can write the run's directories (NFS C(root_squash) fails here, named), reads
    the start floor from the file system's own clock, and runs the optional build step inside."
  - The start floor is the modification time of a file the container writes in the output
    directory, so it comes from the clock that will stamp the traces (the NFS server's, on NFS),
    not from the node's.
author:
  - aorta.cluster maintainers (@aorta-cluster)
options:
  container:
    description: The container's name.
    type: str
    required: true
  run_argv:
    description: The whole C(docker run -d ...) argv (M(aorta.cluster.node_launch) builds each node's).
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
      - A directory of O(writable), as a pair C(container)/C(host) path, whose clock gives the start
        floor.
    type: dict
  build:
    description: A command run inside the container before launch (an empty list skips it).
    type: list
    elements: str
    default: []
  docker:
    description: The docker command.
    type: str
    default: docker
extends_documentation_fragment:
  - aorta.cluster._attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is started; the module returns the argv it would run.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Start the container
  aorta.cluster.run_container:
    container: aorta-benchmark-run1
    run_argv: "{{ aorta_docker_run_argv }}"
    run_dir: /home/me/aorta/.aorta-cluster/run1/node_0
    mount_source: /home/me/aorta
    writable: [/mnt/.aorta-cluster/run1/node_0, /mnt/aorta_runs/run1]
    floor_dir: {container: /mnt/aorta_runs/run1, host: /home/me/aorta/aorta_runs/run1}
"""

RETURN = r"""
container_id:
  description: The started container's id.
  returned: success
  type: str
start_floor:
  description: Epoch seconds on the output directory's clock; files older belong to earlier runs.
  returned: success and O(floor_dir) given
  type: float
removed_same_name:
  description: Whether a container of the same name was removed first.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._container import (
    OPTIONS,
    ContainerError,
    start,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "container": {"type": "str", "required": True},
            **OPTIONS,
            "docker": {"type": "str", "default": "docker"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, run_argv=p["run_argv"])
    try:
        started = start(
            module.run_command,
            p["docker"],
            p["container"],
            p["run_argv"],
            p["run_dir"],
            p["mount_source"],
            p["writable"],
            p["floor_dir"],
            p["build"],
        )
    except ContainerError as exc:
        module.fail_json(msg=str(exc), **exc.extra)
    module.exit_json(changed=True, **started)


if __name__ == "__main__":
    main()
