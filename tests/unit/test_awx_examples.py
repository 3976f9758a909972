# SPDX-License-Identifier: GPL-3.0-or-later
"""The AWX examples (examples/awx/) hold together: the survey passes AWX's own survey-spec rules,
every answer is a variable of this collection with a fitting type and the role's default, the job
template can never be sliced, and the credential type injects what the inventory plugin reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.validation import check_type_dict
from ansible.plugins.loader import inventory_loader

from ansible_collections.aorta.cluster.plugins.inventory import cluster_json
from ansible_collections.aorta.cluster.plugins.module_utils.trace_analysis import _thresholds
from ansible_collections.aorta.cluster.plugins.plugin_utils.launch import _launch

REPO = Path(__file__).resolve().parents[2]
AWX = REPO / "examples" / "awx"
# AWX's JobTemplateSurveySpec.ALLOWED_TYPES: question type -> type its default must have.
ALLOWED_TYPES = {
    "text": str,
    "textarea": str,
    "password": str,
    "multiplechoice": str,
    "multiselect": str,
    "integer": int,
    "float": (float, int),
}
# Which variable types a question type can feed (an answer arrives as str, int or float).
FITS = {
    "integer": {"int", "float"},
    "float": {"float"},
    "text": {"str", "raw"},
    "textarea": {"str", "raw", "dict"},
    "password": {"str"},
    "multiplechoice": {"str", "bool"},
}


def load(name):
    return json.loads((AWX / name).read_text())


def registry():
    return yaml.safe_load((REPO / "roles" / "variables.yml").read_text())["variables"]


def role_default(name):
    for defaults in sorted((REPO / "roles").glob("*/defaults/main.yml")):
        values = yaml.safe_load(defaults.read_text()) or {}
        if name in values:
            return values[name]
    raise KeyError(name)


def awx_survey_errors(spec):
    """AWX's survey-spec validation (awx/api/views JobTemplateSurveySpec._validate_spec_data)."""
    errors = []
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if not isinstance(spec.get(field), kind):
            errors.append(f"{field}: missing or not {kind.__name__}")
    seen = set()
    for idx, item in enumerate(spec.get("spec") or []):
        for field, kind in (("type", str), ("question_name", str), ("variable", str), ("required", bool)):
            if not isinstance(item.get(field), kind):
                errors.append(f"question {idx}: {field} missing or not {kind.__name__}")
        if item.get("variable") in seen:
            errors.append(f"question {idx}: variable {item['variable']} duplicated")
        seen.add(item.get("variable"))
        qtype = item.get("type")
        if qtype not in ALLOWED_TYPES:
            errors.append(f"question {idx}: type {qtype} not allowed")
            continue
        default = item.get("default", "")
        if default != "" and not isinstance(default, ALLOWED_TYPES[qtype]):
            errors.append(f"question {idx}: default {default!r} is not {qtype}")
        for key in ("min", "max"):
            if key in item and item[key] is not None and not isinstance(item[key], int):
                errors.append(f"question {idx}: {key} is not an integer")
        if qtype in ("multiplechoice", "multiselect"):
            choices = item.get("choices")
            if not choices:
                errors.append(f"question {idx}: {qtype} needs choices")
            elif default != "" and any(d not in choices for d in str(default).splitlines()):
                errors.append(f"question {idx}: default not among the choices")
    return errors


def test_survey_passes_awx_rules():
    assert awx_survey_errors(load("survey_spec.json")) == []


def test_awx_rules_catch_what_awx_rejects():
    bad = {
        "name": "x",
        "description": "",
        "spec": [
            {"type": "integer", "question_name": "a", "variable": "v", "required": True, "default": "8"},
            {"type": "text", "question_name": "b", "variable": "v", "required": "yes"},
            {"type": "multiplechoice", "question_name": "c", "variable": "w", "required": False},
        ],
    }
    errors = awx_survey_errors(bad)
    assert any("default '8' is not integer" in e for e in errors)
    assert any("duplicated" in e for e in errors) and any("required missing" in e for e in errors)
    assert any("needs choices" in e for e in errors)


@pytest.mark.parametrize("question", load("survey_spec.json")["spec"], ids=lambda q: q["variable"])
def test_each_answer_is_a_collection_variable_of_a_fitting_type(question):
    spec = registry()[question["variable"]]
    assert spec["type"] in FITS[question["type"]], (question["variable"], spec["type"], question["type"])
    if question["type"] == "multiplechoice" and spec["type"] == "bool":
        assert sorted(question["choices"]) == ["false", "true"]


@pytest.mark.parametrize(
    "variable", ["aorta_docker_image", "aorta_timeout_seconds", "aorta_gpus_per_node", "aorta_fail_on_threshold"]
)
def test_survey_defaults_are_the_role_defaults(variable):
    question = next(q for q in load("survey_spec.json")["spec"] if q["variable"] == variable)
    default = question["default"]
    if question["type"] == "multiplechoice":
        default = default == "true"
    assert default == role_default(variable)


def test_threshold_default_text_means_the_role_default():
    """The textarea default goes through the module's dict conversion, then the report's number check."""
    question = next(q for q in load("survey_spec.json")["spec"] if q["variable"] == "aorta_expected_results")
    parsed = check_type_dict(question["default"])
    limits = {name: _thresholds._threshold_limit(name, value) for name, value in parsed.items()}
    assert limits == role_default("aorta_expected_results")


def test_overrides_answer_reaches_one_override_group():
    answer = "training.max_steps=20\nprofiling.active=2"
    assert _launch.override_tokens(answer, "aorta_runs/x") == [
        "training.output_dir=aorta_runs/x",
        "training.max_steps=20",
        "profiling.active=2",
    ]


def test_job_template_is_never_sliced_and_runs_the_root_playbook():
    template = load("job_template.json")
    assert template["job_slice_count"] == 1
    assert template["allow_simultaneous"] is False  # two runs on the same nodes would share GPUs
    assert template["survey_enabled"] is True
    assert (REPO / template["playbook"]).is_file()
    extra = yaml.safe_load(template["extra_vars"])
    assert set(extra) <= set(registry())
    assert extra["aorta_cluster_connection_vars"] is False  # the Machine credential supplies SSH


def test_credential_type_injects_what_the_inventory_plugin_reads():
    credential = load("credential_type.json")
    assert credential["kind"] == "cloud"  # the kind AWX lets an inventory source use
    field_ids = {field["id"] for field in credential["inputs"]["fields"]}
    assert set(credential["inputs"]["required"]) <= field_ids
    assert credential["injectors"]["file"] == {"template.cluster_json": "{{ cluster_json }}"}
    (env_name,) = credential["injectors"]["env"]
    assert credential["injectors"]["env"][env_name] == "{{ tower.filename.cluster_json }}"
    doc = yaml.safe_load(cluster_json.DOCUMENTATION)
    assert {"name": env_name} in doc["options"]["path"]["env"]


@pytest.mark.parametrize("source", load("inventory_sources.json"), ids=lambda s: s["name"])
def test_inventory_source_files_are_claimed_by_the_plugin(source):
    path = REPO / source["source_path"]
    config = yaml.safe_load(path.read_text())
    assert config["plugin"] == "aorta.cluster.cluster_json"
    assert config.get("connection_vars") is False
    assert inventory_loader.get("aorta.cluster.cluster_json").verify_file(str(path))
    if "credential" in source:
        assert "path" not in config  # the credential's AORTA_CLUSTER_FILE supplies it
    else:
        assert (path.parent / config["path"]).is_file()
    inventories = {s["inventory"] for s in load("inventory_sources.json")}
    assert len(inventories) == len(load("inventory_sources.json"))  # one cluster per inventory
