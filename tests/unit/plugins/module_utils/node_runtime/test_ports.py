# SPDX-License-Identifier: GPL-3.0-or-later
"""_ports binds real sockets: held ports are skipped, ranges and exclusions honoured, the kernel's
ephemeral range avoided, and an address the node does not hold named."""

from __future__ import annotations

import random
import socket

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _ports


def hold(port, address="127.0.0.1"):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((address, port))
    sock.listen(1)
    return sock


def free_block(size):
    """A run of ports that are free right now, from a high unprivileged area."""
    for base in range(21000, 24000, size):  # below the ephemeral range
        if all(_ports.can_bind(p, "0.0.0.0") for p in range(base, base + size)):
            return base
    pytest.fail("no free block of ports for the test")


def test_can_bind_sees_a_listener_on_a_specific_address():
    base = free_block(1)
    sock = hold(base)
    try:
        assert not _ports.can_bind(base, "0.0.0.0")
        assert not _ports.can_bind(base, "127.0.0.1")
    finally:
        sock.close()
    assert _ports.can_bind(base, "0.0.0.0")


def test_a_port_whose_udp_side_is_held_is_not_free():
    """The head's aggregator takes the UDP side of the rendezvous port's number."""
    base = free_block(1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", base))
    try:
        assert not _ports.can_bind(base, "127.0.0.1") and not _ports.can_bind(base, "0.0.0.0")
    finally:
        sock.close()
    assert _ports.can_bind(base, "127.0.0.1")


def test_held_and_excluded_ports_are_never_returned():
    base = free_block(4)
    held = [hold(base), hold(base + 1, "0.0.0.0")]
    try:
        for seed in range(10):
            port, _tried = _ports.find_free_port(
                base, base + 3, ["0.0.0.0", "127.0.0.1"], exclude=[base + 2], rng=random.Random(seed)
            )
            assert port == base + 3
    finally:
        for sock in held:
            sock.close()


def test_ephemeral_range_is_avoided():
    assert _ports.candidates(100, 110, avoid=(105, 200), rng=random.Random(0)) and all(
        p < 105 for p in _ports.candidates(100, 110, avoid=(105, 200), rng=random.Random(0))
    )


def test_random_start_spreads_the_picks():
    picks = {_ports.candidates(30000, 30999, rng=random.Random(seed))[0] for seed in range(20)}
    assert len(picks) > 10


def test_nothing_free_is_a_clear_error():
    base = free_block(2)
    held = [hold(base, "0.0.0.0"), hold(base + 1, "0.0.0.0")]
    try:
        with pytest.raises(_ports.PortError, match=rf"no free TCP port in {base}-{base + 1} on 0.0.0.0 \(2 tried"):
            _ports.find_free_port(base, base + 1, ["0.0.0.0"])
    finally:
        for sock in held:
            sock.close()


def test_address_not_on_this_node_is_named():
    with pytest.raises(_ports.PortError, match=r"192\.0\.2\.77 is not configured on this node"):
        _ports.can_bind(free_block(1), "192.0.2.77")


@pytest.mark.parametrize("start,end", [(0, 10), (500, 400), (65535, 65536)])
def test_bad_ranges(start, end):
    with pytest.raises(_ports.PortError, match="port range"):
        _ports.candidates(start, end)


def test_ephemeral_range_reader(tmp_path):
    path = tmp_path / "range"
    path.write_text("32768\t60999\n")
    assert _ports.ephemeral_range(str(path)) == (32768, 60999)
    assert _ports.ephemeral_range(str(tmp_path / "missing")) is None
