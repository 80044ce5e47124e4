"""NIC discovery from fake sysfs trees: physical vs virtual, link facts, shared bandwidth."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from simdra._driver.devices.model import Device, Inventory
from simdra._driver.kinds.sysfs import SysfsBackend, hostnet
from simdra._driver.kinds.sysfs.nics import NicFacts, bandwidth_capacity, fill_unknown
from simdra._driver.kinds.sysfs.nvml import NoNvml
from tests.devices.sysfs_trees import SysfsTree, nic_node

PHYSICAL = ["nic-eno1", "nic-enp94s0f0", "nic-enp94s0f1", "nic-eth0"]
POLICY = {"default": "1M", "validRange": {"min": "1M", "step": "1M"}}


def discover(tree: SysfsTree, include_virtual: bool = False) -> Inventory:
    return SysfsBackend(tree.sys, tree.dev, node_name="node-b", driver_name="net.example.com",
                        include_virtual_nics=include_virtual, nvml=NoNvml()).discover()


def devices(inventory: Inventory) -> dict[str, Device]:
    return {device.name: device for _, device in inventory.devices()}


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return nic_node(SysfsTree(tmp_path))


def test_only_device_backed_interfaces_by_default(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    # lo, the bridge and the veth have no device behind them.
    assert sorted(found) == PHYSICAL
    assert all(d.attribute("type") == "nic" for d in found.values())
    assert all(d.attribute("virtual") is False for d in found.values())


def test_virtual_interfaces_on_request_but_never_loopback(tree: SysfsTree) -> None:
    found = devices(discover(tree, include_virtual=True))

    assert sorted(found) == sorted([*PHYSICAL, "nic-br0", "nic-veth1a2b3c"])
    bridge = found["nic-br0"]
    assert bridge.attribute("virtual") is True
    assert bridge.attribute("interfaceName") == "br0"
    assert "resource.kubernetes.io/pciBusID" not in bridge.spec["attributes"]


def test_link_speed_is_shared_bandwidth_in_bits_per_second(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    assert found["nic-enp94s0f0"].spec["capacity"] == {
        "bandwidth": {"value": "10G", "requestPolicy": POLICY}}
    assert found["nic-enp94s0f1"].spec["capacity"] == {
        "bandwidth": {"value": "25G", "requestPolicy": POLICY}}
    assert all(d.allows_multiple_allocations for d in found.values())


def test_unknown_or_unreadable_speed_gives_no_capacity(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    assert "capacity" not in found["nic-eth0"].spec  # speed -1
    assert "capacity" not in found["nic-eno1"].spec  # reading speed fails


def test_nic_carries_link_and_pci_facts(tree: SysfsTree) -> None:
    nic = devices(discover(tree))["nic-enp94s0f1"]

    assert nic.attribute("interfaceName") == "enp94s0f1"
    assert nic.attribute("macAddress") == (tree.sys / "class/net/enp94s0f1/address"
                                           ).read_text().strip()
    assert nic.attribute("mtu") == 9000
    assert nic.attribute("numaNode") == 0
    assert nic.attribute("resource.kubernetes.io/pciBusID") == "0000:5e:00.1"
    assert nic.attribute("resource.kubernetes.io/pcieRoot") == "pci0000:5e"
    assert nic.attribute("vendor") == "Mellanox"


def test_netdev_below_a_child_device_finds_its_pci_function(tree: SysfsTree) -> None:
    # virtio: class/net/eth0 -> devices/pci0000:00/0000:00:03.0/virtio2/net/eth0
    eth0 = devices(discover(tree))["nic-eth0"]

    assert eth0.attribute("resource.kubernetes.io/pciBusID") == "0000:00:03.0"
    assert eth0.attribute("vendor") == "virtio"


def test_fake_tree_never_mixes_in_host_facts(tree: SysfsTree,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def host_lookup() -> None:
        raise AssertionError("psutil consulted for a fake sysfs tree")

    monkeypatch.setattr(hostnet, "psutil_fallback", host_lookup)

    assert "capacity" not in devices(discover(tree))["nic-eth0"].spec


@pytest.mark.parametrize(("mbps", "expected"), [
    (25000, {"value": "25G", "requestPolicy": POLICY}),
    (2500, {"value": "2500M", "requestPolicy": POLICY}),
    (100, {"value": "100M", "requestPolicy": POLICY}),
    # One step above the minimum must fit the capacity (api-facts 4.8): no policy at 1 Mb/s.
    (1, {"value": "1M"}),
    (None, None),
    (0, None),
])
def test_bandwidth_capacity(mbps: int | None, expected: dict | None) -> None:
    assert bandwidth_capacity(mbps) == expected


def test_fallback_fills_only_what_sysfs_did_not_know() -> None:
    sysfs = NicFacts(interface="eth0", virtual=False, mac="02:00:00:00:00:01", mtu=None,
                     speed_mbps=None)
    other = NicFacts(interface="eth0", virtual=False, mac="0a:0a:0a:0a:0a:0a", mtu=1400,
                     speed_mbps=10000)

    merged = fill_unknown(sysfs, other)

    assert (merged.mac, merged.mtu, merged.speed_mbps) == ("02:00:00:00:00:01", 1400, 10000)
    assert fill_unknown(sysfs, None) == sysfs


def test_psutil_fallback_reports_this_hosts_interfaces() -> None:
    stats = psutil.net_if_stats()
    name = next(iter(stats))

    facts = hostnet.psutil_fallback()(name)

    assert facts is not None and facts.mtu == (stats[name].mtu or None)
    assert hostnet.psutil_fallback()("no-such-interface-x") is None
