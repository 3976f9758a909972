# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's health reader: each parser against the tools' documented formats (gpu_tools/), the
bounded runner with real processes, and the whole gather with the stand-in amd-smi."""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _health, _kernel_log

FIXTURES = pathlib.Path(__file__).parent / "gpu_tools"
STANDIN = pathlib.Path(__file__).resolve().parents[4] / "standin" / "gpu"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- counting -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "logical", "physical", "partitioned"),
    [
        ("amdsmi_list_rocm61.json", 8, 8, False),
        ("amdsmi_list_rocm62.json", 8, 8, False),
        ("amdsmi_list_cpx.json", 16, 2, True),
        ("amdsmi_list_gpu_data.json", 2, 2, False),
    ],
)
def test_amdsmi_list_counts_devices_and_partitions(name, logical, physical, partitioned):
    counted = _health.parse_amdsmi_list(fixture(name))
    assert (counted["logical"], counted["physical"], counted["partitioned"]) == (logical, physical, partitioned)
    assert counted["error"] == ""


def test_amdsmi_list_tolerates_a_warning_before_the_json_and_says_when_it_has_none():
    text = "WARNING: User is missing the following required groups: render\n" + fixture("amdsmi_list_rocm62.json")
    assert _health.parse_amdsmi_list(text)["logical"] == 8
    broken = _health.parse_amdsmi_list("amdsmi: AMDSMI_STATUS_DRIVER_NOT_LOADED")
    assert broken["logical"] is None and "no GPU entries" in broken["error"]


def test_rocmsmi_ids_with_and_without_the_bus():
    assert _health.parse_rocmsmi_ids(fixture("rocmsmi_showid.json"))["logical"] == 8
    old = _health.parse_rocmsmi_ids(fixture("rocmsmi_showid_old.json"))
    assert (old["logical"], old["physical"], old["partitioned"]) == (4, 4, False)
    assert _health.parse_rocmsmi_ids("ERROR: GPU[0] : Unable to open")["error"] == "rocm-smi printed no JSON"


def test_render_nodes_count_the_drm_render_devices(tmp_path):
    for n in (128, 129, 130):
        (tmp_path / f"renderD{n}").touch()
    assert _health.render_nodes(str(tmp_path / "renderD*"))["logical"] == 3


# --- processes, ECC, fingerprint ------------------------------------------------------------


def test_processes_in_each_known_shape():
    assert _health.parse_amdsmi_processes(fixture("amdsmi_process_idle_rocm61.json")) == []
    busy = _health.parse_amdsmi_processes(fixture("amdsmi_process_busy.json"))
    assert busy == [{"pid": 420157, "name": "TransferBench", "gpu": 0}, {"pid": 420315, "name": "rvs", "gpu": 0}]
    assert _health.parse_amdsmi_processes(fixture("amdsmi_process_gpu_data.json")) == [
        {"pid": 3311, "name": "python3", "gpu": 0}
    ]
    flat = json.dumps([{"process_info": {"name": "x", "pid": 7}}])
    assert _health.parse_amdsmi_processes(flat) == [{"pid": 7, "name": "x", "gpu": None}]


def test_ecc_sums_and_says_what_it_could_not_read():
    old = _health.parse_amdsmi_ecc(fixture("amdsmi_ecc_rocm62.json"))
    assert (old["correctable"], old["uncorrectable"]) == (3, 0)
    assert "2 ECC counts not readable" in old["error"]
    new = _health.parse_amdsmi_ecc(fixture("amdsmi_ecc_gpu_data.json"))
    assert (new["correctable"], new["uncorrectable"]) == (5, 2)
    assert new["gpus"][0]["uncorrectable"] == 2


def test_ras_from_sysfs(tmp_path):
    for card, (ue, ce) in {"card0": (0, 4), "card1": (1, 0)}.items():
        ras = tmp_path / card / "device" / "ras"
        ras.mkdir(parents=True)
        (ras / "umc_err_count").write_text(f"ue: {ue}\nce: {ce}\n")
        (ras / "gfx_err_count").write_text("ue: 0\nce: 1\n")
    read = _health.ras_sysfs(str(tmp_path))
    assert (read["uncorrectable"], read["correctable"]) == (1, 6)
    assert _health.ras_sysfs(str(tmp_path / "none")) is None


def test_static_and_version():
    static = _health.parse_amdsmi_static(fixture("amdsmi_static.json"))
    assert static == {"model": "AMD Instinct MI300X", "driver": "6.8.5", "vbios": "022.040.003.043.000001"}
    assert _health.parse_amdsmi_version(fixture("amdsmi_version.json")) == "6.2.4"
    assert _health.parse_amdsmi_version(fixture("amdsmi_version.txt")) == "6.2.4"
    assert _health.parse_amdsmi_version("AMDSMI Tool: 23.4 | ROCm version: N/A") is None


def test_gpu_processes_name_pid_and_user_never_the_command_line(tmp_path):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "comm").write_text("python3\n")
    (proc / "4242" / "cmdline").write_text("python3\0train.py\0--token=SECRET\0")
    found = _health.gpu_processes(
        [{"pid": 4242, "name": "python3"}, {"pid": 99, "name": "rdcd"}], [4242, 5], {"rdcd"}, proc=str(proc)
    )
    assert [(p["pid"], p["name"], p["allowed"]) for p in found] == [
        (5, "?", False),
        (99, "rdcd", True),
        (4242, "python3", False),
    ]
    assert "SECRET" not in json.dumps(found)
    assert found[2]["user"] != "?"


def test_kfd_pids(tmp_path):
    assert _health.kfd_pids(str(tmp_path / "absent")) is None
    for name in ("12", "7", "not-a-pid"):
        (tmp_path / name).mkdir()
    assert _health.kfd_pids(str(tmp_path)) == [7, 12]


def test_since_marker_starts_at_the_window_then_at_the_previous_probe(tmp_path):
    start, source = _health.since_marker(str(tmp_path), 10_000.0, 3600)
    assert (start, source) == (6400.0, "the last 1 h")
    start, source = _health.since_marker(str(tmp_path), 10_500.0, 3600)
    assert (start, source) == (10_000.0, "previous run")


# --- the bounded runner ---------------------------------------------------------------------


def test_bounded_answers_and_names_a_missing_tool():
    answer = _health.bounded([sys.executable, "-c", "print('hi')"], 10)
    assert (answer["rc"], answer["out"].strip(), answer["timed_out"]) == (0, "hi", False)
    missing = _health.bounded(["/nonexistent/amd-smi"], 10)
    assert missing["missing"] and missing["rc"] is None


def test_bounded_kills_a_hung_tool_and_what_it_started(tmp_path):
    marker = tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {marker}; sleep 60"
    started = time.monotonic()
    answer = _health.bounded(["sh", "-c", script], 0.5)
    assert answer["timed_out"] and answer["rc"] is None
    assert time.monotonic() - started < 5
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild), "the tool's own child outlived the kill"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


# --- the whole gather, with the stand-in amd-smi --------------------------------------------


def standin_which(tmp_path, knobs, tools=("amd-smi",), asked=None):
    (tmp_path / "gpu.json").write_text(json.dumps(knobs))
    os.environ["AORTA_STANDIN_GPU"] = str(tmp_path / "gpu.json")

    def which(name):
        if asked is not None:
            asked.append(name)
        if name not in tools:
            return None
        return str(STANDIN / name) if (STANDIN / name).exists() else "/usr/bin/" + name

    return which


def no_kernel(start, end, runner, timeout):
    return {"source": None, "error": "kernel log not readable (test)", "lines": []}


def gather(tmp_path, knobs, **options):
    which = standin_which(tmp_path, knobs, options.pop("tools", ("amd-smi",)), options.pop("asked", None))
    opts = {"step_timeout": 5, "since_dir": str(tmp_path), "window_s": 3600, **options}
    try:
        return _health.gather(opts, {"docker": {"version": "27.1"}, "image_id": "sha256:1"}, "", no_kernel, which=which)
    finally:
        os.environ.pop("AORTA_STANDIN_GPU", None)


def test_gather_with_a_healthy_standin_tool(tmp_path):
    asked = []
    facts = gather(tmp_path, {"gpus": 8}, asked=asked)
    assert facts["tool"] == "amd-smi"
    assert facts["count"]["logical"] == 8
    assert [s["name"] for s in facts["steps"]] == [
        "amd-smi list",
        "amd-smi static",
        "amd-smi process",
        "amd-smi metric --ecc",
        "amd-smi version",
    ]
    assert facts["processes"] == [] and facts["ecc"]["uncorrectable"] == 0
    # Nothing on the node runs rsync (node_end streams the traces): it is neither looked for nor said.
    assert "rsync" not in asked and "rsync" not in facts
    fp = facts["fingerprint"]
    assert (fp["amdgpu"], fp["rocm"], fp["docker"], fp["image_id"]) == ("6.8.5", "6.2.4", "27.1", "sha256:1")
    assert fp["kernel"] == os.uname().release


def test_gather_names_a_leaked_process_with_its_user(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])  # a real process, so that /proc names its user
    try:
        facts = gather(tmp_path, {"processes": [{"pid": sleeper.pid, "name": "python3"}], "ecc_uncorrectable": 1})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert [(p["pid"], p["name"], p["allowed"]) for p in facts["processes"]] == [(sleeper.pid, "sleep", False)]
    assert facts["processes"][0]["user"] not in ("?", "")
    assert facts["ecc"]["uncorrectable"] == 1


def test_gather_stops_asking_the_gpu_tool_after_it_hung(tmp_path):
    started = time.monotonic()
    facts = gather(tmp_path, {"delay_s": 60}, step_timeout=1)
    assert time.monotonic() - started < 10
    assert facts["steps"][0]["timed_out"]
    assert all(s.get("skipped") for s in facts["steps"][1:]) and len(facts["steps"]) == 5


def test_gather_falls_back_to_rocm_smi_then_to_render_nodes(tmp_path):
    facts = gather(tmp_path, {"gpus": 4, "partitions": 2}, tools=("rocm-smi",))
    assert facts["tool"] == "rocm-smi"
    assert (facts["count"]["logical"], facts["count"]["physical"], facts["count"]["partitioned"]) == (8, 4, True)
    none = gather(tmp_path, {}, tools=())
    assert none["tool"] == "/dev/dri/renderD*" and none["steps"] == []


def test_gather_reads_the_kernel_log_since_the_previous_probe(tmp_path):
    seen = []

    def scan(start, end, runner, timeout):
        seen.append((start, end))
        return _kernel_log.scan(
            start, end, lambda argv, t: (f"{_iso(start + 1)} amdgpu: ring gfx timeout\n", ""), timeout
        )

    which = standin_which(tmp_path, {})
    opts = {"step_timeout": 5, "since_dir": str(tmp_path), "window_s": 600}
    try:
        facts = _health.gather(opts, {}, "", scan, which=which, now=5000.0)
    finally:
        os.environ.pop("AORTA_STANDIN_GPU", None)
    assert seen == [(4400.0, 5000.0)]
    assert facts["kernel"]["lines"][0]["kind"] == "amdgpu" and facts["kernel"]["since_source"] == "the last 0.166667 h"


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc).isoformat()
