# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the supervisor captures at the deadline, before SIGTERM (target side, standard library only).

Private to this collection. Real Aorta runs unchanged: the capture only reads processes from
outside. ``capture_argvs`` gives the commands the supervisor runs (bounded) on the node:

1. ``docker cp`` of the node's py-spy binary into the container (when the node has it);
2. ``docker exec <c> python3 -c CAPTURE_SCRIPT <out_dir> <py-spy> <seconds>``, which, inside the
   container, finds every torchrun worker (its environment carries ``RANK``, ``LOCAL_RANK`` and
   ``TORCHELASTIC_RUN_ID``; a dataloader child with its parent's ``RANK`` is skipped), pokes each
   rank's flight-recorder pipe (``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe``: torch then writes
   ``$TORCH_FR_DUMP_TEMP_FILE<rank>``, or ``$TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>``), takes every
   rank's Python stack with ``py-spy dump --json`` at once, waits for the dumps within the budget,
   and writes ``rank<R>.pyspy.json`` and ``capture.json`` (what was found, what failed) to out_dir.

The script runs on the container's own Python (any 3.6+), so it keeps to old syntax.
"""

from __future__ import annotations

from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis._traces import sha256_file

PYSPY_IN_CONTAINER = "/tmp/aorta-cluster-py-spy"

CAPTURE_SCRIPT = r"""
import errno, json, os, subprocess, sys, time

out_dir, pyspy, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.monotonic() + budget


def environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            key, value = item.split(b"=", 1)
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def in_cwd(pid, path):
    return path if os.path.isabs(path) else os.path.join("/proc/%d/cwd" % pid, path)


workers = {}
for name in os.listdir("/proc"):
    if name.isdigit():
        env = environ(int(name))
        if "RANK" in env and "LOCAL_RANK" in env and "TORCHELASTIC_RUN_ID" in env:
            workers[int(name)] = env
ranks = {}
for pid, env in sorted(workers.items()):
    up = parent(pid)
    if up in workers and workers[up].get("RANK") == env["RANK"]:
        continue  # a child of the rank (dataloader worker), not the rank
    try:
        ranks[int(env["RANK"])] = (pid, env)
    except ValueError:
        pass

os.makedirs(out_dir, exist_ok=True)
record = {"started_at": time.time(), "budget_s": budget, "ranks": {}}
dumps = {}
for rank, (pid, env) in sorted(ranks.items()):
    entry = record["ranks"][str(rank)] = {"pid": pid, "local_rank": env.get("LOCAL_RANK")}
    stem = env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
    dump_stem = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "")
    if not stem:
        entry["flight_recorder"] = "off (TORCH_NCCL_DEBUG_INFO_PIPE_FILE not set)"
        continue
    pipe = in_cwd(pid, "%s%d.pipe" % (stem, rank))
    # Read the old dump's time BEFORE the poke: the rank may answer within the same millisecond.
    target = in_cwd(pid, "%s%d" % (dump_stem, rank)) if dump_stem else ""
    before = os.stat(target).st_mtime if target and os.path.exists(target) else None
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"1")
        finally:
            os.close(fd)
        entry["flight_recorder"] = "requested"
        if target:
            dumps[rank] = (target, before)
    except OSError as exc:
        reason = "nobody reads it" if exc.errno == errno.ENXIO else exc.strerror
        entry["flight_recorder"] = "pipe %s: %s" % (pipe, reason)

spies = {}
if not pyspy:
    record["py_spy"] = "not on this node"
for rank, (pid, _env) in sorted(ranks.items()):
    if not pyspy:
        break
    path = os.path.join(out_dir, "rank%d.pyspy.json" % rank)
    handle = open(path, "wb")
    try:
        spies[rank] = (subprocess.Popen([pyspy, "dump", "--json", "--pid", str(pid)], stdout=handle,
                                        stderr=subprocess.PIPE), path, handle)
    except OSError as exc:
        handle.close()
        record["ranks"][str(rank)]["py_spy"] = "cannot run %s: %s" % (pyspy, exc.strerror)
for rank, (proc, path, handle) in sorted(spies.items()):
    try:
        err = proc.communicate(timeout=max(0.1, end - time.monotonic() - 1))[1]
        text = err.decode("utf-8", "replace").strip()[-300:]
        state = "ok" if proc.returncode == 0 else "exit %d: %s" % (proc.returncode, text)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        state = "timed out"
    handle.close()
    record["ranks"][str(rank)]["py_spy"] = state
    if state != "ok":
        os.unlink(path)

# A dump is done when its file is newer than before the poke and has stopped growing.
waiting = dict(dumps)
sizes = {}
while waiting and time.monotonic() < end:
    for rank, (target, before) in list(waiting.items()):
        try:
            info = os.stat(target)
        except OSError:
            continue
        if before is not None and info.st_mtime <= before:
            continue
        if sizes.get(rank) == info.st_size:
            record["ranks"][str(rank)]["flight_recorder"] = "dumped"
            record["ranks"][str(rank)]["flight_recorder_file"] = target
            del waiting[rank]
        sizes[rank] = info.st_size
    time.sleep(0.2)
for rank in waiting:
    record["ranks"][str(rank)]["flight_recorder"] = "requested, no dump within the budget"
record["ended_at"] = time.time()
partial = os.path.join(out_dir, "capture.json.tmp")
with open(partial, "w") as handle:
    json.dump(record, handle, indent=1, sort_keys=True)
os.replace(partial, os.path.join(out_dir, "capture.json"))
print("captured %d ranks" % len(ranks))
"""


def capture_argvs(docker, container, out_dir, seconds, pyspy_path=None, pyspy_sha256=None):
    """The commands of the capture, in order, and a note on py-spy (empty when it will be used).

    py-spy is used only when the file on the node has the hash the controller expects: the tools
    directory is shared, and what runs as root in the container must be what was sent.
    """
    note = ""
    use_pyspy = False
    if pyspy_path:
        try:
            actual = sha256_file(pyspy_path)
        except OSError:
            actual = None
        if actual is None:
            note = f"py-spy: {pyspy_path} not on this node"
        elif pyspy_sha256 and actual != pyspy_sha256:
            note = f"py-spy: {pyspy_path} is not the binary the controller sent (sha256 differs); not run"
        else:
            use_pyspy = True
    argvs = []
    if use_pyspy:
        argvs.append([docker, "cp", pyspy_path, f"{container}:{PYSPY_IN_CONTAINER}"])
    argvs.append(
        [
            docker,
            "exec",
            container,
            "python3",
            "-c",
            CAPTURE_SCRIPT,
            out_dir,
            PYSPY_IN_CONTAINER if use_pyspy else "",
            str(seconds),
        ]
    )
    return argvs, note
