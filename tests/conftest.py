# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test helpers: where the read-only fixtures are, and the repository root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible.plugins.loader import init_plugin_loader

REPO = Path(__file__).resolve().parents[1]
# Ansible's collection finder must own the ansible_collections namespace before any test imports
# from it, so plugins load the way ansible-playbook loads them (`make venv` makes the link).
init_plugin_loader([str(REPO / ".collections")])
# The checkout and CI's clone both have shared/ beside them; AORTA_SHARED_DIR overrides.
SHARED = Path(os.environ.get("AORTA_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared fixtures not found at {SHARED}; set AORTA_SHARED_DIR")
    return SHARED


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
