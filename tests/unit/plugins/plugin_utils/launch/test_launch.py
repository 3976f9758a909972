# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/launch/_launch.py: rendezvous address, launch mode, torchrun argv, the launch script, the
container's base environment and script mode's output directory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _launch
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch._launch import LaunchError

SPEC = {
    "nnodes": 2,
    "node_rank": 1,
    "nproc_per_node": 8,
    "master_addr": "10.224.0.11",
    "master_port": 29500,
    "train_script": "/mnt/train.py",
    "config": "/mnt/config/distributed.yaml",
}


@pytest.mark.parametrize(
    "override,vpc,key,expected",
    [
        ("10.9.9.9", "10.0.0.1", "head", "10.9.9.9"),
        ("", "10.0.0.1", "head", "10.0.0.1"),
        (None, "10.0.0.1", "head", "10.0.0.1"),
        (None, "NA", "head", "head"),
        ("", "", "head", "head"),
        (" 10.0.0.5 ", None, "head", "10.0.0.5"),
    ],
)
def test_master_addr_precedence(override, vpc, key, expected):
    assert _launch.master_addr(override, vpc, key) == expected


def test_master_addr_without_any_address_fails():
    with pytest.raises(LaunchError, match="aorta_master_addr"):
        _launch.master_addr("", "", "")


@pytest.mark.parametrize(
    "mode,nnodes,expected",
    [
        ("auto", 1, "script"),
        ("auto", 2, "torchrun"),
        ("", 3, "torchrun"),
        (None, 1, "script"),
        ("torchrun", 1, "torchrun"),
        ("script", 1, "script"),
    ],
)
def test_launch_mode(mode, nnodes, expected):
    assert _launch.launch_mode(mode, nnodes) == expected


@pytest.mark.parametrize(
    "mode,nnodes,words", [("script", 2, "one node only"), ("mpirun", 2, "not one of"), ("auto", 0, "no nodes")]
)
def test_launch_mode_errors(mode, nnodes, words):
    with pytest.raises(LaunchError, match=words):
        _launch.launch_mode(mode, nnodes)


@pytest.mark.parametrize("overrides", [{"training.max_steps": 15}, "training.max_steps=15", ["a.b=1"]])
def test_one_node_with_overrides_runs_torchrun_under_auto_and_is_refused_under_script(overrides):
    """Script mode's experiment script takes no --override: auto on one node runs torchrun so the
    overrides apply, and script is refused rather than run without them, unsaid."""
    assert _launch.launch_mode("auto", 1, overrides) == "torchrun"
    assert _launch.launch_mode("torchrun", 1, overrides) == "torchrun"
    with pytest.raises(LaunchError, match="aorta_training_overrides would not apply"):
        _launch.launch_mode("script", 1, overrides)
    # Without overrides: as before.
    assert _launch.launch_mode("auto", 1, {}) == "script" and _launch.launch_mode("script", 1, "") == "script"


def test_overrides_that_do_not_parse_run_torchrun_under_auto_and_are_named_under_script():
    assert _launch.launch_mode("auto", 1, "{bad json") == "torchrun"  # the launch names what is wrong
    with pytest.raises(LaunchError, match="aorta_training_overrides: not a JSON object"):
        _launch.launch_mode("script", 1, "{bad json")


def test_argv_order_and_one_override_group():
    spec = dict(
        SPEC,
        extra_torchrun_args=["--rdzv_backend=c10d"],
        overrides={"training.max_steps": 15, "profiling.active": 6, "ddp.static_graph": True, "dims": [1, 2]},
        extra_train_args=["--enable-rocm-metrics"],
    )
    argv = _launch.torchrun_argv(spec)
    assert argv == [
        "torchrun",
        "--nnodes=2",
        "--node_rank=1",
        "--nproc_per_node=8",
        "--master_addr=10.224.0.11",
        "--master_port=29500",
        "--rdzv_backend=c10d",
        "/mnt/train.py",
        "--config",
        "/mnt/config/distributed.yaml",
        "--override",
        "training.max_steps=15",
        "profiling.active=6",
        "ddp.static_graph=true",
        "dims=[1,2]",
        "--enable-rocm-metrics",
    ]
    assert argv.count("--override") == 1


def test_no_override_flag_without_overrides():
    assert "--override" not in _launch.torchrun_argv(dict(SPEC, overrides={}))


@pytest.mark.parametrize(
    "change,words",
    [
        ({"node_rank": 2}, "outside 0..1"),
        ({"master_port": 70000}, "not a TCP port"),
        ({"nproc_per_node": 0}, "at least 1"),
        ({"master_addr": ""}, "master_addr is required"),
        ({"nnodes": "two"}, "must be integers"),
        ({"extra_torchrun_args": "--a --b"}, "aorta_extra_torchrun_args: must be a list"),
        ({"overrides": {"a b": 1}}, "not a dotted config key"),
        ({"overrides": {"x": {"y": 1}}}, "may not be a mapping"),
        ({"overrides": 7}, "must be a mapping"),
        ({"overrides": "{not json"}, "not a JSON object"),
        ({"overrides": "a='unclosed"}, "cannot split"),
        ({"overrides": "a=1 lonely"}, "entries must be 'key=value'"),
        ({"overrides": {"training.output_dir": "x"}, "output_dir": "runs/1"}, "set aorta_output_dir instead"),
    ],
)
def test_argv_errors_name_the_variable(change, words):
    with pytest.raises(LaunchError, match=words):
        _launch.torchrun_argv(dict(SPEC, **change))


def test_argv_requires_every_rendezvous_field():
    spec = dict(SPEC)
    del spec["nnodes"]
    with pytest.raises(LaunchError, match="nnodes is required"):
        _launch.torchrun_argv(spec)


NASTY = [
    "with space",
    'it\'s "quoted"',
    "$(touch pwned)",
    "`touch pwned2`",
    "a;touch pwned3",
    "line1\nline2",
    "${HOME}",
    "*",
    "",
    "tab\there",
    "back\\slash",
]


def run_script(tmp_path, script):
    path = tmp_path / "launch.sh"
    path.write_text(script)
    result = subprocess.run(["bash", str(path)], capture_output=True, text=True, cwd=tmp_path, check=True)
    return json.loads(result.stdout)


def test_launch_script_delivers_every_argument_byte_for_byte(tmp_path):
    dump = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd()}))"
    overrides = {f"k{i}": value for i, value in enumerate(NASTY)}
    argv = [sys.executable, "-c", dump, "--override", *_launch.override_tokens(overrides), *NASTY]
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    out = run_script(tmp_path, _launch.launch_script(argv, {}, str(workdir)))
    assert out["argv"] == ["--override", *[f"k{i}={v}" for i, v in enumerate(NASTY)], *NASTY]
    assert out["cwd"] == str(workdir)
    assert not list(tmp_path.glob("pwned*")) and not list(workdir.glob("pwned*"))


def test_launch_script_env_expands_only_variable_references(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/image/lib")
    monkeypatch.delenv("UNSET_THING", raising=False)
    env = {
        "LD_LIBRARY_PATH": "/opt/rccl/build:$LD_LIBRARY_PATH",
        "BRACED": "${LD_LIBRARY_PATH}/x",
        "MISSING": "a:$UNSET_THING:b",
        "NASTY": "$(touch pwned) `touch pwned2`; echo \"hi\" 'x'\nnext",
        "NUM": 112,
        "FLAG": True,
        "SKIPPED": None,
    }
    dump = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {list(env)!r}}}))"
    out = run_script(tmp_path, _launch.launch_script([sys.executable, "-c", dump], env))
    assert out == {
        "LD_LIBRARY_PATH": "/opt/rccl/build:/image/lib",
        "BRACED": "/opt/rccl/build:/image/lib/x",  # sees the export above: exports run in order
        "MISSING": "a::b",
        "NASTY": "$(touch pwned) `touch pwned2`; echo \"hi\" 'x'\nnext",
        "NUM": "112",
        "FLAG": "true",
        "SKIPPED": None,
    }
    assert not list(tmp_path.glob("pwned*"))


def test_launch_script_rejects_bad_variable_names():
    with pytest.raises(LaunchError, match="not a valid variable name"):
        _launch.launch_script(["true"], {"BAD-NAME": "1"})
    with pytest.raises(LaunchError, match="empty command"):
        _launch.launch_script([], {})


@pytest.mark.parametrize(
    "answer",
    [
        "training.max_steps=15 profiling.active=6",
        "training.max_steps=15\nprofiling.active=6\n",
        '{"training.max_steps": 15, "profiling.active": 6}',
        ["training.max_steps=15", "profiling.active=6"],
        {"training.max_steps": 15, "profiling.active": 6},
    ],
)
def test_overrides_from_an_awx_survey_answer(answer):
    """A survey textarea arrives as text; every form gives the same single --override group."""
    argv = _launch.torchrun_argv(dict(SPEC, overrides=answer, output_dir="aorta_runs/r1"))
    group = argv[argv.index("--override") + 1 :]
    assert group == ["training.output_dir=aorta_runs/r1", "training.max_steps=15", "profiling.active=6"]
    # The watch's progress line reads the step count from the same answer (text stays text).
    assert str(_launch.override_of(answer, "training.max_steps")) == "15"
    assert _launch.override_of(answer, "training.epochs") is None


def test_override_of_unparsable_overrides_is_none_not_an_error():
    assert _launch.override_of("a.b='unclosed", "a.b") is None and _launch.override_of(None, "a.b") is None


def test_override_text_keeps_quoted_spaces():
    assert _launch.override_tokens("model.name='tiny model' a.b=1") == ["model.name=tiny model", "a.b=1"]


@pytest.mark.parametrize(
    "config,expected",
    [
        ({"training": {"output_dir": "artifacts/profile_overlap_2gpu"}}, "artifacts/profile_overlap_2gpu"),
        ({"training": {"output_dir": "./runs//x/"}}, "runs/x"),
        ({"training": {"output_dir": "/mnt/runs/x"}}, "runs/x"),
        ({"training": {"max_steps": 5}}, "artifacts"),
        ({}, "artifacts"),
    ],
)
def test_script_mode_output_dir_from_the_config(config, expected):
    assert _launch.config_output_dir(config, "/mnt/") == expected


@pytest.mark.parametrize(
    "output_dir,words",
    [("/tmp/out", "is outside /mnt"), ("../elsewhere", "must be a directory below aorta_path"), ("/mnt", "outside")],
)
def test_script_mode_output_dir_that_cannot_be_collected(output_dir, words):
    with pytest.raises(LaunchError, match=f"config/x.yaml: training.output_dir .*{words}"):
        _launch.config_output_dir({"training": {"output_dir": output_dir}}, "/mnt", "config/x.yaml")


def test_base_env_matches_cvs_and_lets_the_user_win():
    env = _launch.base_env(
        {"NCCL_MAX_NCHANNELS": 112, "NCCL_DEBUG": "VERSION"},
        "/mnt/rccl",
        {"NCCL_DEBUG": "INFO", "GLOO_SOCKET_IFNAME": "ib0"},
        {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth1"},
    )
    assert env["TENSILE_STREAMK_MAX_CUS"] == 144
    assert env["LD_LIBRARY_PATH"].startswith("/mnt/rccl/build/release/:/opt/rocm/lib")
    assert env["LD_LIBRARY_PATH"].endswith(":$LD_LIBRARY_PATH")
    assert env["rccl_path"] == "/mnt/rccl"
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["GLOO_SOCKET_IFNAME"] == "ib0"
    assert env["NCCL_SOCKET_IFNAME"] == "eth1"
    with pytest.raises(LaunchError, match="NCCL_MAX_NCHANNELS"):
        _launch.base_env({"NCCL_MAX_NCHANNELS": "many"}, "")


def test_base_env_switches_the_flight_recorder_on_unless_the_user_set_a_variable_of_it():
    fr = {"entries": 2000, "dump_dir": "/mnt/out/diagnostics/node_0"}
    env = _launch.base_env({"TORCH_NCCL_TRACE_BUFFER_SIZE": 50}, "", {"TORCH_NCCL_DUMP_ON_TIMEOUT": 0}, {}, fr)
    assert env["TORCH_FR_BUFFER_SIZE"] == 2000
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == 50  # the user's environment block wins
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == 0  # and so does extra_env
    assert (
        env["TORCH_FR_DUMP_TEMP_FILE"]
        == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
        == "/mnt/out/diagnostics/node_0/fr_rank"
    )
    assert env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"].startswith("/tmp/")  # a FIFO never lands in collected output
    off = _launch.base_env({}, "", {}, {}, {"entries": 0, "dump_dir": "/x"})
    assert not [name for name in off if name.startswith("TORCH_")]
    with pytest.raises(LaunchError, match="aorta_flight_recorder_entries"):
        _launch.base_env({}, "", {}, {}, {"entries": "lots", "dump_dir": "/x"})
    with pytest.raises(LaunchError, match="absolute"):
        _launch.base_env({}, "", {}, {}, {"entries": 10, "dump_dir": "out"})
