# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hook that makes ``--dist loadgroup`` group ``xdist_group`` tests under pytest 9 (conftest.py
imports it; test_xdist_groups.py runs it on a folder of its own)."""

from __future__ import annotations

import pytest
from _pytest.nodeid import coerce_node_id  # pytest 9's node ids: no public API sets one


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Group ``xdist_group`` tests where pytest 9 reads it (docs/testing.md, "Sharing one run").

    pytest-xdist 3.8's loadgroup sends every test whose node id ends in ``@<group>`` to one worker;
    it appends that suffix to ``item._nodeid``, which pytest 9.2 no longer reads (``Node.nodeid`` is
    ``str(Node._id)``), so no test was grouped and each worker built every shared run. Set it on
    ``_id`` instead, once (an xdist that sets it itself is left alone)."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)
