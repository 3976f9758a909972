# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start the run's container and prove it can run the job (aorta.cluster.run_container, and
aorta.cluster.run_supervisor's O(start), which does it in the same module run as the supervisor's start).

Private to this collection. Runs on the node's Python (>= 3.9 syntax), stdlib only.
"""

from __future__ import annotations

import os

PROBE_FILE = ".aorta-write-test"

# start()'s options as modules take them (run_container's, and run_supervisor's start suboptions).
OPTIONS = {
    "run_argv": {"type": "list", "elements": "str", "required": True},
    "run_dir": {"type": "path", "required": True},
    "mount_source": {"type": "path", "required": True},
    "writable": {"type": "list", "elements": "str", "default": []},
    "floor_dir": {"type": "dict"},
    "build": {"type": "list", "elements": "str", "default": []},
}


class ContainerError(Exception):
    """The container could not be started or cannot run the job; ``extra`` goes into the module's result."""

    def __init__(self, msg, **extra):
        super().__init__(msg)
        self.extra = extra


def what_became_of(run_command, docker, container_id):
    """What the engine did to a container that ``docker run -d`` returned and that was gone or stopped
    at once (seen once on 64 light stand-in nodes sharing one engine, 2026-12-06, cause not found):
    its events since the run (``die`` with its exit code: it exited; ``destroy`` without ``die``:
    someone removed it), so the next time says which."""
    if not container_id:
        return "docker run returned no container id"
    rc, out, _err = run_command(
        [docker, "events", "--since", "60s", "--until", "0s", "--filter", f"container={container_id}",
         "--format", "{{.Action}}{{with .Actor.Attributes.exitCode}} (exit {{.}}){{end}}"]
    )  # fmt: skip
    said = ", ".join(line.strip() for line in out.splitlines() if line.strip()) if rc == 0 else ""
    return f"docker run returned {container_id[:12]}; the engine's events for it: {said or 'none'}"


def start(run_command, docker, name, run_argv, run_dir, mount_source, writable=(), floor_dir=None, build=()):
    """Remove a container of the same name, create the run directory as this user, start the container,
    check it runs, prove its root writes ``writable``, read the start floor from ``floor_dir``'s
    clock, and run ``build`` inside. ``run_command(argv) -> (rc, stdout, stderr)``. Returns
    ``{container_id, start_floor, removed_same_name}``; raises ContainerError."""
    rc, _out, _err = run_command([docker, "rm", "-f", name])
    removed = rc == 0
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as exc:
        raise ContainerError(f"cannot create the run directory {run_dir}: {exc.strerror}") from None
    rc, out, err = run_command(list(run_argv))
    if rc != 0:
        raise ContainerError(
            f"Start the container: docker run exited {rc}", rc=rc, stderr=err, stderr_lines=err.splitlines()
        )
    container_id = out.strip()
    rc, out, err = run_command([docker, "inspect", "--format", "{{.State.Running}}", name])
    if rc != 0 or out.strip() != "true":
        raise ContainerError(
            f"the container {name} is not running right after its start: {err.strip() or out.strip()}; "
            + what_became_of(run_command, docker, container_id)
        )

    # The container writes as its root. On NFS exported with root_squash that root is "nobody",
    # and Aorta would die at its first write with an error far from the cause: prove it here.
    script = 'for d in "$@"; do mkdir -p -- "$d" && touch -- "$d/' + PROBE_FILE + '" || exit 1; done'
    rc, _out, err = run_command([docker, "exec", name, "sh", "-c", script, "write-probe", *list(writable)])
    if rc != 0:
        raise ContainerError(
            f"the container (as root) cannot write under {mount_source} ({err.strip()}). If {mount_source} is on "
            "NFS exported with root_squash, the container's root is mapped to nobody: export it with "
            "no_root_squash, or make the run's directories under it writable by nobody, or keep "
            "aorta_path on a local disk. See docs/troubleshooting.md."
        )
    floor = None
    if floor_dir:
        try:
            floor = os.stat(os.path.join(floor_dir["host"], PROBE_FILE)).st_mtime
        except OSError as exc:
            raise ContainerError(f"cannot read the start floor in {floor_dir['host']}: {exc.strerror}") from None
    cleanup = 'for d in "$@"; do rm -f -- "$d/' + PROBE_FILE + '"; done'
    run_command([docker, "exec", name, "sh", "-c", cleanup, "write-probe", *list(writable)])

    if build:
        rc, out, err = run_command([docker, "exec", name, *list(build)])
        if rc != 0:
            raise ContainerError(
                f"Build RCCL on the node: {' '.join(build)} exited {rc}",
                rc=rc,
                stdout=out,
                stderr=err,
                stderr_lines=err.splitlines(),
            )
    return {"container_id": container_id, "start_floor": floor, "removed_same_name": removed}
