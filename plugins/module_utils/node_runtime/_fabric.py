# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Is this node's fabric path still there? Asked by the supervisor when a run did not end well.

Private to this collection; target side, standard library only.

A fabric cut stops every rank of a synchronous job at the same collective, so the ranks' progress
cannot say which node lost its link: every rank waits. What the node itself can still say is
whether its fabric interface is up (``/sys/class/net/<if>/operstate`` and ``carrier``) and whether
a TCP connection from its fabric address reaches the head's fabric address. A refused connection
counts as reached (the head answered: the path works even if the rendezvous port is already
closed); a timeout or "no route" does not. The head does not connect to itself: its own
interface's state is its answer. The controller weighs every node's answer
(``plugin_utils.results._run.fabric_suspects``).
"""

from __future__ import annotations

import errno
import os
import socket
import time

SYSFS_NET = "/sys/class/net"
# connect() errors that mean the path is gone, not the peer's port.
_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL, errno.ENETDOWN, errno.EHOSTDOWN}


def link_state(interface, sysfs=SYSFS_NET):
    """``(operstate, carrier)`` of one interface; carrier is None when the kernel will not say."""
    base = os.path.join(sysfs, interface)
    try:
        with open(os.path.join(base, "operstate")) as handle:
            operstate = handle.read().strip()
    except OSError:
        return "missing", None
    try:
        with open(os.path.join(base, "carrier")) as handle:
            carrier = handle.read().strip() == "1"
    except OSError:  # EINVAL while the interface is administratively down
        carrier = None
    return operstate, carrier


# Errors, not drops: a healthy NIC drops frames it has no buffer or no listener for; an error is a
# bad frame (CRC, length, alignment, carrier), what a dirty cable or a failing port makes.
LINK_COUNTERS = ("rx_errors", "tx_errors")
LINKS_AT_MOST = 64  # interfaces read per probe: a docker host's veths must not make it grow without bound


def _sysfs_int(path):
    """The integer in a sysfs file; None when unreadable or negative (speed is -1 while the link is down)."""
    try:
        with open(path) as handle:
            value = int(handle.read().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def link_facts(interface, sysfs=SYSFS_NET):
    """One interface's negotiated speed (Mb/s; None for virtual links that do not say), MTU, state,
    driver (the device's driver link; "virtual" without a device) and error counters."""
    base = os.path.join(sysfs, interface)
    operstate, carrier = link_state(interface, sysfs)
    device = os.path.join(base, "device")
    driver = os.path.basename(os.path.realpath(os.path.join(device, "driver"))) if os.path.exists(device) else None
    facts = {
        "speed_mbps": _sysfs_int(os.path.join(base, "speed")),
        "mtu": _sysfs_int(os.path.join(base, "mtu")),
        "operstate": operstate,
        "carrier": carrier,
        "driver": driver or "virtual",
    }
    for counter in LINK_COUNTERS:
        facts[counter] = _sysfs_int(os.path.join(base, "statistics", counter))
    return facts


def links(interfaces, sysfs=SYSFS_NET):
    """``link_facts`` of each interface that holds an IPv4 address (``{name: [addresses]}``: the fabric
    address is one; a container's veth has only an IPv6 link-local one), at most LINKS_AT_MOST of them:
    the controller picks the fabric one and keeps only it."""
    named = sorted(name for name, addresses in (interfaces or {}).items() if any(":" not in a for a in addresses))
    return {name: link_facts(name, sysfs) for name in named[:LINKS_AT_MOST]}


def reach(source, target, port, timeout=3.0):
    """``(reached, error)`` of one TCP connection from ``source`` to ``target:port``."""
    try:
        conn = socket.create_connection((target, int(port)), timeout=timeout, source_address=(source, 0))
    except ConnectionRefusedError:
        return True, ""
    except socket.timeout:
        return False, f"no answer within {timeout:g}s"
    except OSError as exc:
        if exc.errno in _UNREACHABLE:
            return False, exc.strerror or str(exc)
        return True, exc.strerror or str(exc)  # an answer of some kind: the path is there
    conn.close()
    return True, ""


def check(interface, source, target, port, timeout=3.0, sysfs=SYSFS_NET, clock=time.time):
    """The node's fabric record: interface state, the head reached or not, and ``ok``.

    ``link_up`` is False only for an interface that is down or has lost its carrier ("unknown", which
    virtual interfaces report, counts as up). ``head_reached`` is None on the head itself.
    """
    operstate, carrier = link_state(interface, sysfs)
    link_up = operstate in ("up", "unknown") and carrier is not False
    record = {
        "interface": interface,
        "operstate": operstate,
        "carrier": carrier,
        "link_up": link_up,
        "head": f"{target}:{port}",
        "head_reached": None,
        "error": "",
        "at": round(clock(), 3),
    }
    if source != target:
        record["head_reached"], record["error"] = reach(source, target, port, timeout)
    record["ok"] = link_up and record["head_reached"] is not False
    return record
