# SPDX-License-Identifier: GPL-3.0-or-later
"""The node probe gathers facts with real commands on this machine (and a docker CLI stand-in)."""

from __future__ import annotations

import os
import subprocess
import time

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _probe


def run(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    return out.returncode, out.stdout, out.stderr


def fake_docker(tmp_path, version_rc=0):
    script = tmp_path / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = version ]; then [ {version_rc} = 0 ] && echo 27.1 && exit 0; '
        'echo "Cannot connect" >&2; exit 1; fi\n'
        'if [ "$1" = image ] && [ "$5" = present:1 ]; then echo sha256:abc; exit 0; fi\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    return str(script)


def test_docker_version_and_image_id(tmp_path):
    docker = fake_docker(tmp_path)
    assert _probe.docker_facts(run, docker, "present:1") == {
        "docker": {"ok": True, "version": "27.1", "error": ""},
        "image_id": "sha256:abc",
    }
    assert _probe.docker_facts(run, docker, "absent:1")["image_id"] is None
    down = _probe.docker_facts(run, fake_docker(tmp_path, 1), "present:1")
    assert down["docker"] == {"ok": False, "version": "", "error": "Cannot connect"} and down["image_id"] is None


def test_gather_reads_paths_disk_interfaces_and_clock(tmp_path):
    (tmp_path / "train.py").write_text("")
    before = time.time()
    facts = _probe.gather(run, fake_docker(tmp_path), "present:1", str(tmp_path), ["train.py", "missing.yaml"])
    assert facts["paths"] == {"train.py": True, "missing.yaml": False}
    statvfs = os.statvfs(tmp_path)
    assert abs(facts["disk"]["free_bytes"] - statvfs.f_bavail * statvfs.f_frsize) < 64 * 2**20
    assert "127.0.0.1" in facts["interfaces"]["lo"] and facts["error"] == ""
    assert facts["gpus"] == {"count": None, "tool": ""}  # not asked
    assert before <= facts["clock"] <= time.time()
    assert facts["uid"] == os.getuid()


def test_gpu_count_without_any_tool_is_none():
    assert _probe.gpu_count(lambda argv: (127, "", "not found")) == {"count": None, "tool": ""}
    csv = "gpu,name\n0,MI300X\n1,MI300X\n"
    assert _probe.gpu_count(lambda argv: (0, csv, "")) == {"count": 2, "tool": "amd-smi"}


# `amd-smi list --csv` with the columns of ROCm 6.2+ (gpu_tools/amdsmi_list_rocm62.json, as CSV).
AMDSMI_LIST_CSV = (
    "gpu,bdf,uuid,kfd_id,node_id,partition_id\n"
    "0,0000:05:00.0,00ff74a1-0000-1000-80a9-e5e3b05a1b50,45412,2,0\n"
    "1,0000:26:00.0,01ff74a1-0000-1000-80a9-e5e3b05a1b51,45419,3,0\n"
)


def amdsmi(out, rc=0):
    def run(argv):
        if argv[0] == "amd-smi":
            return rc, out, ""
        return 127, "", "rocm-smi: not found"

    return run


def test_amd_smi_warnings_on_stdout_are_not_gpus():
    # amd-smi prints its warnings on stdout, before the header and after the rows.
    before = "WARNING: User is missing the following required groups: render, video\n"
    after = "\nWARNING: amdgpu driver version 6.8.5 is older than expected, results may vary\n\n"
    assert _probe.gpu_count(amdsmi(AMDSMI_LIST_CSV)) == {"count": 2, "tool": "amd-smi"}
    assert _probe.gpu_count(amdsmi(before + AMDSMI_LIST_CSV)) == {"count": 2, "tool": "amd-smi"}
    assert _probe.gpu_count(amdsmi(AMDSMI_LIST_CSV + after)) == {"count": 2, "tool": "amd-smi"}
    assert _probe.gpu_count(amdsmi(before + before + AMDSMI_LIST_CSV + after)) == {"count": 2, "tool": "amd-smi"}


def test_amd_smi_rows_are_read_by_the_header_not_by_position():
    rows = _probe.amdsmi_list_rows("WARNING: x, y\n" + AMDSMI_LIST_CSV + "Total GPUs,2\n")
    assert [(r["gpu"], r["bdf"], r["partition_id"]) for r in rows] == [
        ("0", "0000:05:00.0", "0"),
        ("1", "0000:26:00.0", "0"),
    ]
    assert _probe.amdsmi_list_rows("gpu,bdf\n") == []  # a node without GPUs
    assert _probe.amdsmi_list_rows("WARNING: no GPU found\n") is None  # no list at all


def test_an_amd_smi_answer_without_a_csv_list_lets_rocm_smi_count():
    def run(argv):
        if argv[0] == "amd-smi":
            return 0, "WARNING: amdgpu driver not loaded\n", ""
        return 0, "card0,0x74a1\ncard1,0x74a1\n", ""

    assert _probe.gpu_count(run) == {"count": 2, "tool": "rocm-smi"}


def test_interfaces_error_is_reported_not_raised():
    assert (
        _probe.interfaces(lambda argv: (1, "", 'Object "address" is unknown\n'))["error"]
        == 'Object "address" is unknown'
    )
    assert _probe.interfaces(lambda argv: (0, "not json", ""))["error"] == "ip -j address printed no JSON"


def test_group_ids_are_numeric_in_order_and_skip_missing_groups():
    assert _probe.group_ids(("root", "no-such-group-aorta", "root")) == ["0", "0"]


def test_tool_facts_say_which_files_have_the_expected_size_and_make_the_missing_ones_directory(tmp_path):
    have = tmp_path / "tools" / "py-spy-aaaa"
    have.parent.mkdir()
    have.write_bytes(b"12345")
    wanted = tmp_path / "fresh" / "tools" / "py-spy-bbbb"
    facts = _probe.tool_facts(
        [
            {"name": "py-spy", "path": str(have), "size": 5},
            {"name": "other", "path": str(wanted), "size": 5},
        ]
    )
    assert facts == {"py-spy": True, "other": False}
    assert wanted.parent.is_dir() and (wanted.parent.stat().st_mode & 0o7777) == 0o1777
    assert _probe.tool_facts([{"name": "py-spy", "path": str(have), "size": 6}]) == {"py-spy": False}


def test_the_config_is_read_bounded_and_a_missing_one_is_said(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "distributed.yaml").write_text("training:\n  batch_size: 64\n")
    assert _probe.read_facts(str(tmp_path), "config/distributed.yaml") == {
        "path": "config/distributed.yaml",
        "text": "training:\n  batch_size: 64\n",
        "truncated": False,
        "error": "",
    }
    (tmp_path / "big.yaml").write_bytes(b"x" * (_probe.READ_MAX + 10))
    big = _probe.read_facts(str(tmp_path), "big.yaml")
    assert big["truncated"] and len(big["text"]) == _probe.READ_MAX
    missing = _probe.read_facts(str(tmp_path), "nope.yaml")
    assert missing["text"] is None and missing["error"] == "No such file or directory"


def pull_docker(tmp_path, pull_script):
    """A docker CLI stand-in whose ``pull`` runs ``pull_script`` (sh) and writes its pid first;
    ``image inspect`` finds the image once a pull touched ``has-image``."""
    script = tmp_path / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f"here={tmp_path}\n"
        'if [ "$1" = version ]; then echo 27.1; exit 0; fi\n'
        'if [ "$1" = image ]; then [ -f "$here/has-image" ] && echo sha256:pulled && exit 0; exit 1; fi\n'
        'if [ "$1" = pull ]; then echo $$ > "$here/pull.pid"; ' + pull_script + "; fi\n"
        "exit 1\n"
    )
    script.chmod(0o755)
    return str(script)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by init) is gone too.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_pull_the_registry_refuses_fails_with_dockers_own_line(tmp_path):
    refusal = (
        "echo 'Error response from daemon: manifest for rocm/pytorch:no-such-tag not found: "
        "manifest unknown: manifest unknown' >&2; exit 1"
    )
    pulled = _probe.pull_image(pull_docker(tmp_path, refusal), "rocm/pytorch:no-such-tag", answer_s=10)
    assert pulled["state"] == "failed"
    assert pulled["error"] == (
        "Error response from daemon: manifest for rocm/pytorch:no-such-tag not found: "
        "manifest unknown: manifest unknown"
    )
    assert pulled["seconds"] < 5 and pulled["answer_s"] == 10


def test_a_pull_that_ends_well_is_pulled_and_the_id_is_read_again(tmp_path):
    docker = pull_docker(tmp_path, f"touch {tmp_path}/has-image; exit 0")
    facts = _probe.docker_facts(run, docker, "small:1", lambda d, i: _probe.pull_image(d, i, 10))
    assert facts["pull"]["state"] == "pulled" and facts["image_id"] == "sha256:pulled"


def test_a_pull_under_way_is_left_to_go_on_once_the_registry_resolved_the_name(tmp_path):
    # docker's first line comes once the registry has the name; the layers then take minutes.
    slow = "echo 'Using default tag: latest'; sleep 0.5; echo 'latest: Pulling from big'; sleep 30"
    docker = pull_docker(tmp_path, slow)
    started = time.monotonic()
    pulled = _probe.pull_image(docker, "big", answer_s=20, poll_s=0.05)
    assert pulled["state"] == "pulling" and time.monotonic() - started < 10
    pid = int((tmp_path / "pull.pid").read_text())
    try:
        assert alive(pid)  # detached, in its own session: the launch's own pull joins it
        assert os.getsid(pid) == pid
    finally:
        os.killpg(pid, 9)  # the stand-in and its sleep


def test_a_pull_that_says_nothing_is_stopped_at_its_bound(tmp_path):
    docker = pull_docker(tmp_path, "echo 'Using default tag: latest'; sleep 30")
    pulled = _probe.pull_image(docker, "silent", answer_s=0.5, poll_s=0.05)
    assert pulled["state"] == "no answer" and pulled["error"] == ""
    assert not alive(int((tmp_path / "pull.pid").read_text()))


def test_the_image_is_pulled_only_where_missing_and_gather_passes_the_bound(tmp_path):
    asked = []

    def pull(docker, image):
        asked.append(image)
        return {"state": "failed", "error": "Error: x", "seconds": 0, "answer_s": 1}

    assert "pull" not in _probe.docker_facts(run, fake_docker(tmp_path), "present:1", pull) and asked == []
    facts = _probe.docker_facts(run, fake_docker(tmp_path), "absent:1", pull)
    assert asked == ["absent:1"] and facts["pull"]["state"] == "failed" and facts["image_id"] is None
    refusal = "echo 'Error response from daemon: pull access denied for x' >&2; exit 1"
    gathered = _probe.gather(run, pull_docker(tmp_path, refusal), "x:1", str(tmp_path), pull={"answer_s": 7})
    assert gathered["pull"]["state"] == "failed" and gathered["pull"]["answer_s"] == 7.0
    assert "pull" not in _probe.gather(run, pull_docker(tmp_path, refusal), "x:1", str(tmp_path))


def test_dockers_error_is_one_line_its_last_error_line():
    said = 'Error response from daemon: Get "https://r/v2/": dial tcp: lookup r: no such host'
    assert _probe.error_line(f"Using default tag: latest\n{said}\n") == said
    assert _probe.error_line("invalid reference format\n") == "invalid reference format"
    assert _probe.error_line("") == ""
    long = _probe.error_line("Error " + "x" * 900)
    assert len(long) == _probe.ERROR_LINE_MAX and long.endswith("\u2026")
