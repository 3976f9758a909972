# SPDX-License-Identifier: GPL-3.0-or-later
"""The free_port module answers with a port every given address can bind (its picking is
_ports', tested in tests/unit/plugins/module_utils/node_runtime/test_ports.py), and fails in one line."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _ports
from ansible_collections.aorta.cluster.plugins.modules import free_port


def free_block(size):
    """A run of ports that are free right now, from a high unprivileged area."""
    for base in range(21000, 24000, size):  # below the ephemeral range
        if all(_ports.can_bind(p, "0.0.0.0") for p in range(base, base + size)):
            return base
    pytest.fail("no free block of ports for the test")


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as info:
        free_port.main()
    return info.value.code, json.loads(capsys.readouterr().out)


def test_module_returns_a_bindable_port_in_check_mode(capsys):
    base = free_block(8)
    code, result = run_module(
        {
            "port_range_start": base,
            "port_range_end": base + 7,
            "addresses": ["0.0.0.0", "127.0.0.1"],
            "_ansible_check_mode": True,
        },
        capsys,
    )
    assert code == 0, result
    assert result["changed"] is False
    assert base <= result["port"] <= base + 7
    assert _ports.can_bind(result["port"], "0.0.0.0")
    assert result["addresses"] == ["0.0.0.0", "127.0.0.1"]


def test_module_fails_cleanly(capsys):
    code, result = run_module({"addresses": ["192.0.2.77"]}, capsys)
    assert code == 1
    assert result["failed"] is True
    assert "192.0.2.77 is not configured on this node" in result["msg"]
