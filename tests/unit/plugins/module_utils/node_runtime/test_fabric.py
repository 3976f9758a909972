# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's fabric check with real sockets on loopback and a sysfs tree laid out like the kernel's."""

from __future__ import annotations

import shutil
import socket

import pytest

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime import _fabric


def sysfs(tmp_path, operstate, carrier):
    base = tmp_path / "net" / "eth1"
    base.mkdir(parents=True)
    (base / "operstate").write_text(operstate + "\n")
    if carrier is not None:  # the kernel refuses to read carrier while the link is down
        (base / "carrier").write_text(carrier + "\n")
    return str(tmp_path / "net")


@pytest.mark.parametrize(
    ("operstate", "carrier", "expected"),
    [("up", "1", ("up", True)), ("down", None, ("down", None)), ("up", "0", ("up", False))],
)
def test_link_state_reads_operstate_and_carrier(tmp_path, operstate, carrier, expected):
    assert _fabric.link_state("eth1", sysfs(tmp_path, operstate, carrier)) == expected


def test_link_state_of_the_real_loopback_and_of_an_interface_that_is_not_there():
    assert _fabric.link_state("lo")[0] in ("unknown", "up")
    assert _fabric.link_state("no-such-if0") == ("missing", None)


def test_link_facts_read_speed_mtu_driver_and_error_counters_as_the_kernel_lays_them_out(tmp_path):
    root = sysfs(tmp_path, "up", "1")
    base = tmp_path / "net" / "eth1"
    (base / "speed").write_text("400000\n")
    (base / "mtu").write_text("9000\n")
    (base / "statistics").mkdir()
    (base / "statistics" / "rx_errors").write_text("3\n")
    (base / "statistics" / "tx_errors").write_text("0\n")
    driver = tmp_path / "drivers" / "mlx5_core"
    driver.mkdir(parents=True)
    (base / "device").mkdir()
    (base / "device" / "driver").symlink_to(driver)
    assert _fabric.link_facts("eth1", root) == {
        "speed_mbps": 400000,
        "mtu": 9000,
        "operstate": "up",
        "carrier": True,
        "driver": "mlx5_core",
        "rx_errors": 3,
        "tx_errors": 0,
    }
    # A link that is down says speed -1: not a speed. A virtual one has no device.
    (base / "speed").write_text("-1\n")
    shutil.rmtree(base / "device")
    down = _fabric.link_facts("eth1", root)
    assert down["speed_mbps"] is None and down["driver"] == "virtual"


def test_links_reads_the_interfaces_that_hold_an_address_within_a_bound(tmp_path):
    found = _fabric.links(
        {"lo": ["127.0.0.1"], "docker0": [], "veth1a2b": ["fe80::1"], "eth0": ["10.0.0.2", "fe80::2"]}
    )
    assert set(found) == {"lo", "eth0"}
    many = {f"veth{i:03d}": ["169.254.0.1"] for i in range(200)}
    assert len(_fabric.links(many, str(tmp_path))) == _fabric.LINKS_AT_MOST
    real = _fabric.links({"lo": ["127.0.0.1"]})["lo"]
    with open("/sys/class/net/lo/mtu") as handle:
        assert real["mtu"] == int(handle.read())


def test_a_listening_head_and_a_closed_port_both_count_as_reached():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert _fabric.reach("127.0.0.1", "127.0.0.1", server.getsockname()[1]) == (True, "")
        closed = server.getsockname()[1]
    reached, error = _fabric.reach("127.0.0.1", "127.0.0.1", closed)
    assert reached is True and error == ""


def test_a_source_address_this_node_does_not_have_is_not_reached():
    # No packet leaves: the bind to an address the host lacks fails first (EADDRNOTAVAIL).
    reached, error = _fabric.reach("10.255.255.254", "127.0.0.1", 9, timeout=0.5)
    assert reached is False and error


def test_a_head_that_never_answers_is_not_reached_within_the_timeout():
    # A listener whose accept queue is full drops further SYNs: the connect times out, on loopback.
    # Fill it until a filler itself is not answered, so the queue is known full before the check.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        try:
            for _filler in range(16):
                filler = socket.socket()
                filler.settimeout(0.3)
                fillers.append(filler)
                try:
                    filler.connect(("127.0.0.1", port))
                except socket.timeout:
                    break
            else:
                pytest.fail("the accept queue never filled")
            reached, error = _fabric.reach("127.0.0.1", "127.0.0.1", port, timeout=0.5)
        finally:
            for filler in fillers:
                filler.close()
    assert reached is False and "no answer within 0.5s" in error


def test_check_names_a_down_link_and_the_head_only_checks_its_link(tmp_path):
    down = _fabric.check("eth1", "127.0.0.1", "127.0.0.2", 9, sysfs=sysfs(tmp_path, "down", None), clock=lambda: 5.0)
    assert down["link_up"] is False and down["ok"] is False and down["at"] == 5.0
    head = _fabric.check("eth1", "10.0.0.1", "10.0.0.1", 29500, sysfs=sysfs(tmp_path / "h", "up", "1"))
    assert head["head_reached"] is None and head["ok"] is True and head["head"] == "10.0.0.1:29500"


def test_check_of_a_worker_whose_link_is_up_but_cannot_reach_the_head(tmp_path):
    record = _fabric.check("eth1", "10.255.255.254", "127.0.0.1", 9, timeout=0.5, sysfs=sysfs(tmp_path, "up", "1"))
    assert record["link_up"] is True and record["head_reached"] is False and record["ok"] is False
