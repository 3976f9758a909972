# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Everything preflight asks of a node, gathered in one module run (target side, stdlib only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax). It gathers facts and
judges nothing: the controller judges them (plugin_utils/_preflight.py), so the rules are unit
tested once and the messages stay the same whatever the node runs.

``run`` is a callable ``run(argv) -> (rc, stdout, stderr)`` (the module passes
AnsibleModule.run_command).
"""

from __future__ import annotations

import csv
import grp
import json
import os
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._lease import shared_dir

GPU_DEVICES = ("/dev/kfd", "/dev/dri")
CONTAINER_DEVICES = ("/dev/kfd", "/dev/dri", "/dev/infiniband")


def _last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def docker_facts(run, docker, image):
    """Server version (or why it does not answer) and the image's id (None when absent)."""
    rc, out, err = run([docker, "version", "--format", "{{.Server.Version}}"])
    facts = {
        "docker": {"ok": rc == 0, "version": out.strip() if rc == 0 else "", "error": "" if rc == 0 else err.strip()}
    }
    image_id = None
    if rc == 0 and image:
        rc, out, _err = run([docker, "image", "inspect", "--format", "{{.Id}}", image])
        image_id = out.strip() if rc == 0 else None
    facts["image_id"] = image_id
    return facts


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


def gather(run, docker="docker", image="", root="", paths=(), count_gpus=False, read=""):
    """One node's facts for preflight and the container start (``read``: a file under ``root`` whose
    text comes back too)."""
    facts = docker_facts(run, docker, image)
    facts["paths"] = path_facts(root, paths) if root else {}
    if read and root:
        facts["read"] = read_facts(root, read)
    facts["disk"] = disk_facts(root or "/")
    facts["gpu_devices"] = {d: os.path.exists(d) for d in GPU_DEVICES}
    facts["gpus"] = gpu_count(run) if count_gpus else {"count": None, "tool": ""}
    facts["container_devices"] = [d for d in CONTAINER_DEVICES if os.path.exists(d)]
    facts["group_ids"] = group_ids()
    facts.update(interfaces(run))
    facts["uid"], facts["gid"] = os.getuid(), os.getgid()
    facts["clock"] = time.time()
    return facts
