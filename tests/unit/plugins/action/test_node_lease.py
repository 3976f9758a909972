# SPDX-License-Identifier: GPL-3.0-or-later
"""node_lease's action fills the owner with this controller's identity; another run is refused."""

from __future__ import annotations

import getpass
import re
import socket


def test_owner_is_this_controller_and_another_run_is_refused_naming_it(play, tmp_path):
    directory = str(tmp_path / "lease")
    _rc, first = play({"aorta.cluster.node_lease": {"run_id": "run-a", "directory": directory}})
    assert first["result"] == "acquired"
    _rc, second = play({"aorta.cluster.node_lease": {"run_id": "run-b", "directory": directory}})
    assert second["failed"]
    owner = second["holder"]["owner"]
    assert re.fullmatch(rf"{getpass.getuser()}@{re.escape(socket.gethostname())} \(ansible-playbook pid \d+\)", owner)
    assert "held by run run-a" in second["msg"]
