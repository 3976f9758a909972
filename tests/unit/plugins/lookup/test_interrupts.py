# SPDX-License-Identifier: GPL-3.0-or-later
"""aorta.cluster.interrupts: returns the play's hosts and installs the stop handler once."""

from __future__ import annotations

from ansible.plugins.loader import lookup_loader

from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _interrupt


def test_the_hosts_come_back_and_the_handler_is_installed_once(monkeypatch):
    installed = []
    monkeypatch.setattr(_interrupt, "install", lambda write: installed.append(write) or "/tmp/x")
    lookup = lookup_loader.get("aorta.cluster.interrupts")
    assert lookup.run(["localhost"], variables={}) == ["localhost"]
    assert len(installed) == 1 and callable(installed[0])
