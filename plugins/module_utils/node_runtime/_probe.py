# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Everything preflight asks of a node, gathered in one module run (target side, stdlib only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax). It gathers facts and
judges nothing: the controller judges them (plugin_utils/cluster/_preflight.py), so the rules are unit
tested once and the messages stay the same whatever the node runs.

``run`` is a callable ``run(argv) -> (rc, stdout, stderr)`` (the module passes
AnsibleModule.run_command).
"""

from __future__ import annotations

import contextlib
import csv
import grp
import json
import os
import signal
import subprocess
import tempfile
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._fabric import links
from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import shared_dir

GPU_DEVICES = ("/dev/kfd", "/dev/dri")
CONTAINER_DEVICES = ("/dev/kfd", "/dev/dri", "/dev/infiniband")


def _last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


# How long preflight waits for ``docker pull`` to show that the image can be had (its first line of
# progress: the registry resolved the name) or to fail: a registry that says no (an unknown tag, a
# refused login, a name that does not resolve) does within seconds; docker's own timeouts for a
# registry that does not answer are 15 to 30 s per endpoint. Inside the prepare task's margin
# (_time_bounds.PREPARE_MARGIN_S), for the head's probe and then each worker's.
PULL_ANSWER_S = 60.0
PULL_POLL_S = 0.2
ERROR_LINE_MAX = 500  # docker's error line, kept whole in run.json up to this


def _image_id(run, docker, image):
    rc, out, _err = run([docker, "image", "inspect", "--format", "{{.Id}}", image])
    return out.strip() if rc == 0 and out.strip() else None


def docker_facts(run, docker, image, pull=None):
    """Server version (or why it does not answer) and the image's id (None when absent). With
    ``pull`` (a callable ``pull(docker, image) -> facts``, see ``pull_image``), a missing image is
    pulled: ``facts["pull"]`` says how that went, and the id is read again when the pull ended."""
    rc, out, err = run([docker, "version", "--format", "{{.Server.Version}}"])
    facts = {
        "docker": {"ok": rc == 0, "version": out.strip() if rc == 0 else "", "error": "" if rc == 0 else err.strip()}
    }
    image_id = None
    if rc == 0 and image:
        image_id = _image_id(run, docker, image)
        if image_id is None and pull is not None:
            facts["pull"] = pull(docker, image)
            if facts["pull"]["state"] == "pulled":
                image_id = _image_id(run, docker, image)
    facts["image_id"] = image_id
    return facts


def error_line(text, limit=ERROR_LINE_MAX):
    """Docker's own error, on one line: the last line that starts with ``Error``/``error`` (docker
    prints ``Error response from daemon: ...``), else the last line; at most ``limit`` characters."""
    lines = [" ".join(line.split()) for line in (text or "").splitlines() if line.strip()]
    said = [line for line in lines if line.lower().startswith("error")]
    line = (said or lines or [""])[-1]
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _read(handle):
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")


def _progress(text):
    """Whether ``docker pull``'s stdout shows progress: any line but the CLI's own ``Using default
    tag`` (printed before the registry is asked). The daemon sends its first line (``<tag>: Pulling
    from <repo>``) once the registry has resolved the name; an error goes to stderr instead."""
    return any(line.strip() and not line.startswith("Using default tag") for line in text.splitlines())


def pull_image(docker, image, answer_s=PULL_ANSWER_S, poll_s=PULL_POLL_S):
    """``docker pull image``, in its own session, watched until it ends, shows the image can be had,
    or has said nothing for ``answer_s`` seconds. ``{"state", "error", "seconds", "answer_s"}``:

    - ``pulled``: it ended well (a small image, or layers the node had);
    - ``pulling``: the registry resolved the name and the layers are coming; the pull goes on on the
      node, detached (its output to unlinked files), and the launch's own pull joins it (docker
      shares a layer's download between pulls);
    - ``failed``: it ended badly; ``error`` is docker's own error line;
    - ``no answer``: nothing within ``answer_s``; the pull is stopped.
    """
    started = time.monotonic()

    def said(state, error=""):
        return {"state": state, "error": error, "seconds": round(time.monotonic() - started, 3), "answer_s": answer_s}

    # Unlinked files, not pipes: a pull left to go on must not die of a reader gone.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            # Not module.run_command: that waits for the end, and a big image's end is the launch's.
            proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
                [docker, "pull", image],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return said("failed", f"cannot run {docker}: {exc.strerror or exc}")
        while True:
            rc = proc.poll()
            if rc is not None:
                if rc == 0:
                    return said("pulled")
                return said("failed", error_line(_read(err)) or f"docker pull exited {rc}")
            if _progress(_read(out)):
                return said("pulling")
            if time.monotonic() - started >= answer_s:
                _stop(proc)
                return said("no answer", error_line(_read(err)))
            time.sleep(poll_s)


def _stop(proc):
    """The pull's whole session killed and reaped (the docker CLI; the daemon drops its pull then)."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def path_facts(root, relative_paths):
    return {p: os.path.exists(os.path.join(root, p)) for p in relative_paths}


READ_MAX = 256 << 10  # a config file, not a data file: the rest is cut and said


def read_facts(root, relative):
    """The text of one small file under ``root`` (the run's Aorta config, for the report's run
    context): ``{path, text, truncated, error}``; never fails the probe."""
    path = os.path.join(root, relative)
    try:
        with open(path, "rb") as handle:
            data = handle.read(READ_MAX + 1)
    except OSError as exc:
        return {"path": relative, "text": None, "truncated": False, "error": exc.strerror or str(exc)}
    return {
        "path": relative,
        "text": data[:READ_MAX].decode("utf-8", "replace"),
        "truncated": len(data) > READ_MAX,
        "error": "",
    }


def disk_facts(path):
    """Free bytes for an unprivileged user at ``path`` and the file system's size (statvfs: no df
    output to parse). The supervisor asks it too, while the workload writes."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": path, "free_bytes": None, "total_bytes": None, "error": exc.strerror}
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return {"path": path, "free_bytes": free, "total_bytes": total, "error": ""}


def amdsmi_list_rows(text):
    """The GPU rows of ``amd-smi list --csv`` (header ``gpu,bdf,uuid,...``, then one row per GPU
    starting with its integer index), as dicts keyed by the header; None without a header.

    amd-smi prints its warnings on stdout too, before the header and after the rows (and may end
    with a blank line): the header is looked for rather than taken to be the first line, and only
    rows whose ``gpu`` cell is an integer are GPUs.
    """
    lines = iter((text or "").splitlines())
    for line in lines:
        header = [cell.strip().lower() for cell in next(csv.reader([line]), [])]
        if "gpu" in header:
            break
    else:
        return None
    column = header.index("gpu")
    rows = []
    for cells in csv.reader(lines):  # the lines after the header
        index = cells[column].strip() if len(cells) > column else ""
        if index.isascii() and index.isdigit():
            rows.append(dict(zip(header, (cell.strip() for cell in cells))))
    return rows


def gpu_count(run):
    """GPUs amd-smi (else rocm-smi) lists, with the tool that counted them; None when neither answers.

    An amd-smi that answers without a CSV header printed no list this can read: rocm-smi counts then.
    """
    rc, out, _err = run(["amd-smi", "list", "--csv"])
    rows = amdsmi_list_rows(out) if rc == 0 else None
    if rows is not None:
        return {"count": len(rows), "tool": "amd-smi"}
    rc, out, _err = run(["rocm-smi", "--showid", "--csv"])
    if rc == 0:
        return {"count": sum(1 for line in out.splitlines() if line.startswith("card")), "tool": "rocm-smi"}
    return {"count": None, "tool": ""}


def interfaces(run):
    """Interface name -> its IPv4 and IPv6 addresses, from ``ip -j address``."""
    rc, out, err = run(["ip", "-j", "address", "show"])
    if rc != 0:
        return {"error": _last_line(err) or "ip -j address failed", "interfaces": {}}
    try:
        data = json.loads(out)
    except ValueError:
        return {"error": "ip -j address printed no JSON", "interfaces": {}}
    found = {}
    for entry in data:
        name = entry.get("ifname")
        if name:
            found[name] = [a.get("local") for a in entry.get("addr_info", []) if a.get("local")]
    return {"error": "", "interfaces": found}


def group_ids(names=("video", "render")):
    """Numeric gids of the groups the node has, in ``names`` order; groups it lacks are skipped.

    Numeric, because the image may not know a group called ``render`` while the node's
    /dev/dri/renderD* belong to it.
    """
    gids = []
    for name in names:
        try:
            gids.append(str(grp.getgrnam(name).gr_gid))
        except KeyError:
            continue
    return gids


def tool_facts(tools, check_mode=False):
    """``{name: True}`` for each tool whose file is on the node with the expected size.

    Creates the tools' directory (shared like /tmp, as the lease's) so the copy that follows can
    write there; the name carries the hash, the supervisor checks the whole hash before use.
    """
    facts = {}
    for tool in tools or ():
        path = str(tool.get("path") or "")
        if not path:
            continue
        try:
            facts[tool["name"]] = os.path.getsize(path) == int(tool.get("size") or -1)
        except OSError:
            facts[tool["name"]] = False
        if not facts[tool["name"]] and not check_mode:
            shared_dir(os.path.dirname(path))
    return facts


def gather(run, docker="docker", image="", root="", paths=(), count_gpus=False, read="", pull=None):
    """One node's facts for preflight and the container start (``read``: a file under ``root`` whose
    text comes back too; ``pull``: ``{"answer_s": s}`` to pull a missing image, see ``pull_image``)."""
    puller = None
    if pull is not None:
        answer_s = float(pull.get("answer_s") or PULL_ANSWER_S)

        def puller(docker, image):
            return pull_image(docker, image, answer_s)

    facts = docker_facts(run, docker, image, puller)
    facts["paths"] = path_facts(root, paths) if root else {}
    if read and root:
        facts["read"] = read_facts(root, read)
    facts["disk"] = disk_facts(root or "/")
    facts["gpu_devices"] = {d: os.path.exists(d) for d in GPU_DEVICES}
    facts["gpus"] = gpu_count(run) if count_gpus else {"count": None, "tool": ""}
    facts["container_devices"] = [d for d in CONTAINER_DEVICES if os.path.exists(d)]
    facts["group_ids"] = group_ids()
    facts.update(interfaces(run))
    facts["links"] = links(facts["interfaces"])  # speed, MTU, errors: the fabric one joins the fingerprint
    facts["uid"], facts["gid"] = os.getuid(), os.getgid()
    facts["clock"] = time.time()
    return facts
