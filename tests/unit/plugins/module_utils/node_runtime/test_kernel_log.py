# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel-log scan: the trouble patterns on real kernel message shapes, the window, and the
fall-back from journalctl to dmesg to "not readable" (the runner is a stand-in for the two programs)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _kernel_log as kl


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("amdgpu 0000:05:00.0: amdgpu: GPU reset begin!", "amdgpu"),
        ("[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=3, emitted seq=4", "amdgpu"),
        ("amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32769)", "amdgpu"),
        ("amdgpu 0000:15:00.0: amdgpu: xgmi link down on hive 0x1234", "xgmi"),
        ("xgmi: link 3 lost", "xgmi"),
        ("mce: [Hardware Error]: Machine check events logged", "mce"),
        ("INFO: task python3:1234 blocked for more than 120 seconds.", "hung task"),
        ("Out of memory: Killed process 4321 (python3)", "oom"),
        ("mlx5_core 0000:3b:00.0 ens1f0np0: Link down", "nic link down"),
        ("ionic 0000:c1:00.0 enp193s0: Link is Down", "nic link down"),
        ("pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received", "pcie"),
    ],
)
def test_trouble_lines_are_named(line, kind):
    assert kl.match(line) == kind


@pytest.mark.parametrize(
    "line",
    ["eth1: renamed from veth12ab", "docker0: port 1(veth3) entered forwarding state", "amdgpu: loaded firmware"],
)
def test_ordinary_lines_are_not_trouble(line):
    assert kl.match(line) is None


def iso(epoch, sep=","):
    return (
        datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
        .isoformat(timespec="microseconds")
        .replace(".", sep)
    )


def test_journalctl_is_asked_for_the_window_and_its_lines_kept():
    calls = []

    def runner(argv, _timeout):
        calls.append(argv)
        return f"{iso(1000.5, '.')} n1 kernel: amdgpu: GPU reset begin!\n{iso(1001, '.')} n1 kernel: fine\n", ""

    found = kl.scan(1000, 1010, runner)
    assert calls[0][:2] == ["journalctl", "-k"] and "@1000" in calls[0] and "@1011" in calls[0]
    assert found["source"] == "journalctl" and found["error"] == ""
    assert [(x["at"], x["kind"]) for x in found["lines"]] == [(1000.5, "amdgpu")]


def test_dmesg_serves_when_journalctl_cannot_and_only_the_window_counts():
    def runner(argv, _timeout):
        if argv[0] == "journalctl":
            return None, "[Errno 2] No such file or directory: 'journalctl'"
        return "\n".join(
            [f"{iso(990)} xgmi: link 1 lost", f"{iso(1005)} xgmi: link 2 lost", f"{iso(1020)} xgmi: link 3 lost"]
        ), ""

    found = kl.scan(1000, 1010, runner)
    assert found["source"] == "dmesg"
    assert [x["line"] for x in found["lines"]] == ["xgmi: link 2 lost"]


def test_a_log_nobody_may_read_is_said_so_and_is_not_an_error():
    def runner(argv, _timeout):
        return None, "Operation not permitted" if argv[0] == "dmesg" else "No journal files were found."

    found = kl.scan(1000, 1010, runner)
    assert found["source"] is None and found["lines"] == []
    assert "not readable" in found["error"] and "Operation not permitted" in found["error"]


def test_a_flood_is_capped_and_the_rest_counted():
    text = "\n".join(f"{iso(1000 + i / 1000)} mce: Hardware Error {i}" for i in range(kl.MAX_LINES + 50))
    found = kl.scan(999, 1010, lambda argv, _t: (text, ""))
    assert len(found["lines"]) == kl.MAX_LINES and found["dropped"] == 50


def test_the_documented_list_is_the_list():
    doc = (Path(__file__).parents[5] / "docs" / "troubleshooting.md").read_text()
    section = doc.split("### The nodes' kernel logs", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "` |" in line]
    documented = [(r.split(" | ")[0][2:], r.split("`")[1].replace("\\|", "|")) for r in rows]
    assert documented == list(kl.PATTERNS)
