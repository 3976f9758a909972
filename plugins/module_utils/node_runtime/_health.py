# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's health and fingerprint, read in the one probe (target side, stdlib only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax). It reads and parses, and
judges nothing: the controller judges (plugin_utils/cluster/_health_verdict.py), so every rule is unit
tested once and the messages are the same whatever the node runs.

Every tool runs bounded: in its own session, with a timeout, killed as a group when it overruns,
and never waited on after that (a tool stuck in the kernel ignores SIGKILL until the driver lets
go). After one GPU tool has timed out no other GPU tool is started: it would hang the same way.

The GPU tools' output changes across ROCm versions; every parser takes what it finds and says
what it could not read instead of failing (fixtures of each known format are in
tests/unit/plugins/module_utils/gpu_tools/).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import time

# Exporters and agents that hold a GPU on purpose on a healthy node (docs/health.md lists them).
DEFAULT_ALLOW = (
    "amd-smi",
    "rocm-smi",
    "rdcd",
    "gpuagent",
    "amd-metrics-exporter",
    "amd-device-metrics-exporter",
    "device-metrics-exporter",
)
KFD_PROC = "/sys/class/kfd/kfd/proc"
DRM = "/sys/class/drm"
NOT_READ = ("", "N/A", "n/a", "NA", None)


def bounded(argv, timeout):
    """Run ``argv`` for at most ``timeout`` seconds: ``{rc, out, err, seconds, timed_out, missing}``.

    Its own session, so that the kill reaches whatever it started; stdin closed and its output
    on pipes of ours, so that nothing it leaves behind holds the module's answer.
    """
    started = time.monotonic()
    answer = {"rc": None, "out": "", "err": "", "seconds": 0.0, "timed_out": False, "missing": False}
    try:
        proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        answer.update(err=exc.strerror or str(exc), missing=isinstance(exc, FileNotFoundError))
        return answer
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        # Not communicate() again: a child in uninterruptible sleep would hold us with it.
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        answer.update(
            timed_out=True, seconds=round(time.monotonic() - started, 3), err=f"no answer within {timeout:g} s"
        )
        return answer
    answer.update(
        rc=proc.returncode,
        out=out.decode("utf-8", "replace"),
        err=err.decode("utf-8", "replace").strip()[-300:],
        seconds=round(time.monotonic() - started, 3),
    )
    return answer


def _json(text):
    """The JSON document in ``text``; amd-smi may print warnings before it. None when there is none."""
    text = (text or "").strip()
    for start in range(len(text)):
        if text[start] in "[{":
            try:
                return json.loads(text[start:])
            except ValueError:
                continue
    return None


def gpu_entries(data):
    """The per-GPU entries of an amd-smi JSON answer, whatever its envelope: a list (ROCm 6.0-6.3),
    ``{"gpu_data": [...]}`` (later), or one GPU's object (a single-GPU node)."""
    if isinstance(data, dict):
        for key in ("gpu_data", "gpus", "devices"):
            if isinstance(data.get(key), list):
                return [e for e in data[key] if isinstance(e, dict)]
        return [data] if data else []
    if isinstance(data, list):
        return [e for e in data if isinstance(e, dict)]
    return []


def _value(node):
    """A leaf that may be ``{"value": v, "unit": u}`` (newer amd-smi) or the bare value."""
    if isinstance(node, dict) and "value" in node:
        return node["value"]
    return node


def _int(node):
    node = _value(node)
    try:
        return int(str(node).strip(), 0)
    except (TypeError, ValueError):
        return None


def parse_amdsmi_list(text):
    """``{logical, physical, partitioned, error}`` from ``amd-smi list --json``.

    In a compute partition mode (DPX, QPX, CPX) each device is listed once per partition: the
    partitions share the device's BDF, and newer versions give their ``partition_id``."""
    entries = gpu_entries(_json(text))
    if not entries:
        return {"logical": None, "physical": None, "partitioned": False, "error": "amd-smi list printed no GPU entries"}
    devices = set()
    for index, entry in enumerate(entries):
        bdf = str(entry.get("bdf") or entry.get("gpu_bdf") or "")
        partition = _int(entry.get("partition_id"))
        if bdf and bdf not in NOT_READ:
            devices.add(bdf)
        elif partition in (None, 0):
            devices.add(f"#{index}")
    physical = len(devices) or len(entries)
    return {"logical": len(entries), "physical": physical, "partitioned": physical < len(entries), "error": ""}


def parse_rocmsmi_ids(text):
    """``{logical, physical, partitioned, error}`` from ``rocm-smi --showid --showbus --json``
    (``{"card0": {...}, ...}``; older versions print no bus, then every card counts as a device)."""
    data = _json(text)
    if not isinstance(data, dict):
        return {"logical": None, "physical": None, "partitioned": False, "error": "rocm-smi printed no JSON"}
    cards = [v for k, v in data.items() if str(k).startswith("card") and isinstance(v, dict)]
    if not cards:
        return {"logical": None, "physical": None, "partitioned": False, "error": "rocm-smi listed no card"}
    buses = {str(c.get("PCI Bus") or c.get("PCI Bus ID") or "") for c in cards}
    physical = len(buses) if "" not in buses else len(cards)
    return {"logical": len(cards), "physical": physical, "partitioned": physical < len(cards), "error": ""}


def render_nodes(pattern="/dev/dri/renderD*"):
    """``{logical, physical, partitioned, error}`` from the DRM render nodes, when no tool answers."""
    count = len(glob.glob(pattern))
    return {"logical": count, "physical": count, "partitioned": False, "error": ""}


def parse_amdsmi_processes(text):
    """``[{pid, name, gpu}]`` from ``amd-smi process --json``.

    Known shapes: a list per GPU of ``{"gpu": n, "process_list": [{"process_info": {...}}]}``
    (``process_info`` is the string "No running processes detected" when idle), the same inside
    ``{"gpu_data": [...]}``, and older flat lists of ``{"process_info": {...}}``."""
    found = []
    for entry in gpu_entries(_json(text)):
        gpu = entry.get("gpu")
        items = entry.get("process_list")
        if items is None and "process_info" in entry:
            items = [entry]
        for item in items or ():
            info = item.get("process_info", item) if isinstance(item, dict) else None
            if not isinstance(info, dict):
                continue
            pid = _int(info.get("pid"))
            if pid:
                found.append({"pid": pid, "name": str(info.get("name") or ""), "gpu": gpu})
    return found


def parse_amdsmi_ecc(text):
    """``{correctable, uncorrectable, deferred, gpus, error}`` summed over the GPUs, from
    ``amd-smi metric --ecc --json``; counts a GPU cannot read (N/A) are left out and said."""
    entries = gpu_entries(_json(text))
    totals = {"correctable": 0, "uncorrectable": 0, "deferred": 0, "gpus": [], "error": ""}
    unread = 0
    for entry in entries:
        ecc = entry.get("ecc") if isinstance(entry.get("ecc"), dict) else entry
        row = {"gpu": entry.get("gpu")}
        for key in ("correctable", "uncorrectable", "deferred"):
            count = _int(ecc.get(f"total_{key}_count", ecc.get(f"{key}_count")))
            row[key] = count
            if count is None:
                unread += key != "deferred"
            else:
                totals[key] += count
        totals["gpus"].append(row)
    if not entries:
        totals["error"] = "amd-smi metric --ecc printed no GPU entries"
    elif unread:
        totals["error"] = f"{unread} ECC counts not readable (N/A)"
    return totals


def ras_sysfs(root=DRM):
    """The same counts from amdgpu's sysfs (``cardN/device/ras/*_err_count``: "ue: n" and "ce: n"
    lines), readable without a tool and without root; None when the driver exposes none."""
    totals = {"correctable": 0, "uncorrectable": 0, "deferred": 0, "gpus": [], "error": ""}
    seen = False
    for card in sorted(glob.glob(os.path.join(root, "card[0-9]*"))):
        row = {"gpu": os.path.basename(card), "correctable": 0, "uncorrectable": 0}
        for path in glob.glob(os.path.join(card, "device", "ras", "*_err_count")):
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError:
                continue
            seen = True
            for kind, key in (("ue", "uncorrectable"), ("ce", "correctable")):
                match = re.search(rf"^{kind}:\s*(\d+)", text, re.MULTILINE)
                if match:
                    row[key] += int(match.group(1))
                    totals[key] += int(match.group(1))
        totals["gpus"].append(row)
    return totals if seen else None


def parse_amdsmi_static(text):
    """``{model, driver, vbios}`` of the first GPU, from ``amd-smi static --asic --driver --vbios --json``
    (with each distinct value of every GPU when they differ: ``models``, ``vbios_versions``)."""
    models, drivers, vbioses = [], [], []
    for entry in gpu_entries(_json(text)):
        asic = entry.get("asic") if isinstance(entry.get("asic"), dict) else {}
        driver = entry.get("driver") if isinstance(entry.get("driver"), dict) else {}
        vbios = entry.get("vbios") or entry.get("ifwi")
        vbios = vbios if isinstance(vbios, dict) else {}
        for found, value in (
            (models, asic.get("market_name")),
            (drivers, driver.get("version")),
            (vbioses, vbios.get("version") or vbios.get("part_number")),
        ):
            if value not in NOT_READ and str(value) not in found:
                found.append(str(value))
    return {
        "model": ",".join(models) or None,
        "driver": ",".join(drivers) or None,
        "vbios": ",".join(vbioses) or None,
    }


def parse_amdsmi_version(text):
    """The ROCm version ``amd-smi version`` states: JSON (a list or an object with
    ``rocm_version``), else its one human-readable line ("... | ROCm version: 6.2.4")."""
    data = _json(text)
    for entry in data if isinstance(data, list) else [data]:
        if isinstance(entry, dict) and entry.get("rocm_version") not in NOT_READ:
            return str(entry["rocm_version"])
    match = re.search(r"ROCm version:\s*([^\s|]+)", text or "")
    return match.group(1) if match and match.group(1) not in NOT_READ else None


def _owner(pid, proc="/proc"):
    try:
        uid = os.stat(os.path.join(proc, str(pid))).st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _comm(pid, proc="/proc"):
    try:
        with open(os.path.join(proc, str(pid), "comm"), encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def kfd_pids(root=KFD_PROC):
    """PIDs that hold a KFD (compute) context, from the kernel's own list; readable by any user.
    None when the node has no KFD (no amdgpu, or a stand-in)."""
    if not os.path.isdir(root):
        return None
    try:
        return sorted(int(name) for name in os.listdir(root) if name.isdigit())
    except OSError:
        return None


def gpu_processes(listed, kfd, allow, own_pid=None, proc="/proc"):
    """Processes holding a GPU: ``{pid, name, user, allowed}`` per pid of the tool's list and the
    kernel's, each once. Never the command line: it may hold secrets."""
    names = {}
    for item in listed or ():
        names.setdefault(item["pid"], item.get("name") or "")
    for pid in kfd or ():
        names.setdefault(pid, "")
    found = []
    for pid in sorted(names):
        if pid == own_pid:
            continue
        name = _comm(pid, proc) or names[pid] or "?"
        found.append({"pid": pid, "name": name, "user": _owner(pid, proc), "allowed": name in allow})
    return found


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def nic_facts(interface, run, timeout):
    """The fabric interface's driver, model (PCI vendor:device) and firmware, where readable."""
    if not interface:
        return {"driver": None, "model": None, "firmware": None}
    device = os.path.join("/sys/class/net", interface, "device")
    driver = os.path.basename(os.path.realpath(os.path.join(device, "driver"))) if os.path.exists(device) else None
    vendor, model = _read(os.path.join(device, "vendor")), _read(os.path.join(device, "device"))
    facts = {
        "driver": driver or "virtual",
        "model": f"{vendor}:{model}" if vendor and model else None,
        "firmware": None,
    }
    answer = run(["ethtool", "-i", interface], timeout)
    if answer["rc"] == 0:
        for line in answer["out"].splitlines():
            key, _sep, value = line.partition(":")
            if key.strip() == "firmware-version" and value.strip() not in NOT_READ:
                facts["firmware"] = value.strip()
            elif key.strip() == "driver" and value.strip():
                facts["driver"] = value.strip()
    return facts


def since_marker(directory, now, window_s, keep=False):
    """When the previous probe of this node ran (kept in ``directory``), else ``now - window_s``;
    the marker is moved to ``now`` for the next run (``keep``: left as it is, in check mode)."""
    path = os.path.join(directory, "health-since")
    start = now - window_s
    try:
        with open(path, encoding="utf-8") as handle:
            start = max(start, float(handle.read().strip()))
        source = "previous run"
    except (OSError, ValueError):
        source = f"the last {window_s / 3600:g} h"
    if keep:
        return start, source
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(f"{now:.3f}\n")
        os.replace(path + ".tmp", path)
    except OSError:
        pass
    return start, source


def _step(steps, name, answer, tool=""):
    steps.append(
        {
            "name": name,
            "tool": tool,
            "seconds": answer["seconds"],
            "timed_out": answer["timed_out"],
            "error": "" if answer["rc"] == 0 else answer["err"] or f"exit {answer['rc']}",
        }
    )
    return answer


def gpu_health(options, run=bounded, which=None):
    """GPUs seen, processes holding them, ECC counts and the tool's answer time, with the tool that
    said each: amd-smi, else rocm-smi, else /dev/dri/renderD*."""
    which = which or _which
    timeout = float(options.get("step_timeout") or 30)
    steps = []
    facts = {"tool": "", "steps": steps, "count": render_nodes(), "listed": [], "ecc": None, "fingerprint": {}}
    amdsmi, rocmsmi = which("amd-smi"), which("rocm-smi")
    if amdsmi:
        facts["tool"] = "amd-smi"
        answer = _step(steps, "amd-smi list", run([amdsmi, "list", "--json"], timeout), "amd-smi")
        if answer["rc"] == 0:
            facts["count"] = parse_amdsmi_list(answer["out"])
        plan = (
            ("amd-smi static", ["static", "--asic", "--driver", "--vbios", "--json"]),
            ("amd-smi process", ["process", "--json"]),
            ("amd-smi metric --ecc", ["metric", "--ecc", "--json"]),
            ("amd-smi version", ["version", "--json"]),
        )
        for name, args in plan:
            if any(s["timed_out"] for s in steps):
                steps.append(
                    {
                        "name": name,
                        "tool": "amd-smi",
                        "seconds": 0,
                        "timed_out": False,
                        "skipped": True,
                        "error": "not run: an earlier step timed out",
                    }
                )
                continue
            answer = _step(steps, name, run([amdsmi, *args], timeout), "amd-smi")
            if answer["rc"] != 0:
                continue
            if name == "amd-smi static":
                facts["fingerprint"].update(parse_amdsmi_static(answer["out"]))
            elif name == "amd-smi process":
                facts["listed"] = parse_amdsmi_processes(answer["out"])
            elif name == "amd-smi metric --ecc":
                facts["ecc"] = parse_amdsmi_ecc(answer["out"])
            else:
                facts["fingerprint"]["rocm"] = parse_amdsmi_version(answer["out"])
    elif rocmsmi:
        facts["tool"] = "rocm-smi"
        answer = _step(
            steps, "rocm-smi --showid", run([rocmsmi, "--showid", "--showbus", "--json"], timeout), "rocm-smi"
        )
        if answer["rc"] == 0:
            facts["count"] = parse_rocmsmi_ids(answer["out"])
    else:
        facts["tool"] = "/dev/dri/renderD*"
    if facts["ecc"] is None:
        facts["ecc"] = ras_sysfs()
    return facts


def _which(name):
    # ROCm installs its tools under /opt/rocm/bin, often not on a non-login shell's PATH.
    return shutil.which(name, path=os.environ.get("PATH", os.defpath) + os.pathsep + "/opt/rocm/bin")


def fingerprint(tool_facts, docker_version, image_id, nic):
    """What the node runs, for drift between nodes: kernel, ROCm, amdgpu driver, GPU model and
    VBIOS, the fabric NIC, docker and the image."""
    tool = tool_facts.get("fingerprint") or {}
    rocm = tool.get("rocm") or _read("/opt/rocm/.info/version")
    return {
        "kernel": os.uname().release,
        "rocm": rocm,
        "amdgpu": tool.get("driver") or _read("/sys/module/amdgpu/version"),
        "gpu_model": tool.get("model"),
        "vbios": tool.get("vbios"),
        "nic_driver": nic.get("driver"),
        "nic_model": nic.get("model"),
        "nic_firmware": nic.get("firmware"),
        "docker": docker_version or None,
        "image_id": image_id,
    }


def gather(options, docker_facts, interface, kernel_scan, run=bounded, which=None, now=None):
    """The node's health and fingerprint: ``options`` keys step_timeout, allow, since_dir,
    window_s; ``kernel_scan(start, end, runner, timeout)`` is _kernel_log.scan."""
    now = time.time() if now is None else now
    started = time.monotonic()
    facts = gpu_health(options, run, which)
    allow = set(options.get("allow") or DEFAULT_ALLOW)
    facts["processes"] = gpu_processes(facts.pop("listed"), kfd_pids(), allow, own_pid=os.getpid())
    timeout = float(options.get("step_timeout") or 30)
    nic = nic_facts(interface, run, min(timeout, 10))
    facts["fingerprint"] = fingerprint(
        facts, (docker_facts.get("docker") or {}).get("version"), docker_facts.get("image_id"), nic
    )
    start, source = since_marker(
        options.get("since_dir") or "/tmp",
        now,
        float(options.get("window_s") or 86400),
        options.get("keep_marker", False),
    )

    def runner(argv, seconds):
        answer = run(argv, seconds)
        if answer["rc"] == 0:
            return answer["out"], ""
        return None, answer["err"] or f"exit {answer['rc']}"

    facts["kernel"] = dict(
        kernel_scan(start, now, runner, min(timeout, 10)), since=round(start, 3), since_source=source
    )
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts
