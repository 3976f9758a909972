# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Port selection (TCP and UDP) on the node that will listen (target side, standard library only).

Private to this collection. Runs on the node's Python (>= 3.9 syntax).
"""

from __future__ import annotations

import errno
import random
import socket

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


class PortError(Exception):
    """No usable port, or an address this node does not hold."""


def ephemeral_range(path: str = EPHEMERAL_RANGE_FILE):
    """The kernel's ephemeral port range as (low, high), or None where it cannot be read."""
    try:
        with open(path) as handle:
            low, high = (int(v) for v in handle.read().split()[:2])
    except (OSError, ValueError):
        return None
    return low, high


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def can_bind(port: int, address: str) -> bool:
    """True when a TCP listener and a UDP socket could both bind ``address:port`` now: torchrun's
    store takes the TCP side, the head's aggregator (``_aggregator``) the UDP side.

    No SO_REUSEADDR: a port that another socket holds in any state counts as taken.
    Raises PortError when the address itself is not on this node.
    """
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        sock = socket.socket(_family(address), kind)
        try:
            sock.bind((address, port))
            if kind == socket.SOCK_STREAM:
                sock.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise PortError(f"address {address} is not configured on this node") from None
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
        finally:
            sock.close()
    return True


def candidates(start: int, end: int, exclude=(), avoid=None, rng=None):
    """Ports in [start, end] minus ``exclude`` and the ``avoid`` range, starting at a random offset.

    The random start keeps two runs picking at once on the same head from choosing the same port
    in the window between the pick and torchrun's bind.
    """
    if not 1 <= start <= end <= 65535:
        raise PortError(f"port range {start}-{end} is not within 1-65535 with start <= end")
    excluded = {int(p) for p in exclude}
    ports = [p for p in range(start, end + 1) if p not in excluded and not (avoid and avoid[0] <= p <= avoid[1])]
    if ports:
        offset = (rng or random.SystemRandom()).randrange(len(ports))
        ports = ports[offset:] + ports[:offset]
    return ports


def find_free_port(start, end, addresses, exclude=(), avoid=None, rng=None):
    """First candidate port that every address in ``addresses`` can bind; returns (port, tried)."""
    tried = 0
    for port in candidates(start, end, exclude, avoid, rng):
        tried += 1
        if all(can_bind(port, address) for address in addresses):
            return port, tried
    skipped = f"; skipped the kernel's ephemeral range {avoid[0]}-{avoid[1]}" if avoid else ""
    raise PortError(
        f"no free TCP port in {start}-{end} on {', '.join(addresses)} ({tried} tried, {len(set(exclude))} excluded"
        f"{skipped}); widen the range or set aorta_master_port"
    )
