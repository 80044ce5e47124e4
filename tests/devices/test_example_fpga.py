"""The example FPGA backend against fake sysfs trees laid out as the kernel does: DFL cards
below their PCI function, a ZynqMP manager below a platform device, class links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simdra._driver.core.validation import validate_device
from simdra._driver.devices.backend import BackendContext
from simdra._driver.devices.model import Device, Inventory
from simdra._driver.kinds.fpga import FpgaBackend
from tests.devices.sysfs_trees import SysfsTree

NODE = "node-a"
DFL_MANAGER = "DFL FME FPGA Manager"
ZYNQMP_PARENT = "devices/platform/firmware:zynqmp-firmware/firmware:zynqmp-firmware:pcap"


def fpga_manager(tree: SysfsTree, parent: Path, number: int, name: str, state: str) -> Path:
    """`<parent>/fpga_manager/fpga<number>` with its files, linked from the class."""
    path = parent / "fpga_manager" / f"fpga{number}"
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "state").write_text(state + "\n")
    (path / "status").write_text("")
    _link(path / "device", parent)
    (tree.sys / "class/fpga_manager").mkdir(parents=True, exist_ok=True)
    _link(tree.sys / "class/fpga_manager" / f"fpga{number}", path)
    return path


def dfl_card(tree: SysfsTree, address: str, *, fme: int, ports: tuple[int, ...],
             manager: int, state: str = "unknown", bridge: str | None = None) -> Path:
    """An Intel DFL card: PCI function (behind `bridge`) -> region -> FME (+ manager) and
    ports, where the FME and ports are character devices (a `dev` file), the manager not."""
    function = tree.pci_function(address, class_code=0x120000, vendor=0x8086,
                                 device=0x0B30, driver="dfl-pci", bridge=bridge)
    region = function / "fpga_region" / f"region{fme}"
    for node in (f"dfl-fme.{fme}", *(f"dfl-port.{p}" for p in ports)):
        (region / node).mkdir(parents=True)
        (region / node / "dev").write_text(f"{509 + node.count('port')}:{fme}\n")
    mgr_device = region / f"dfl-fme.{fme}" / f"dfl-fme-mgr.{fme}"
    mgr_device.mkdir()
    return fpga_manager(tree, mgr_device, manager, DFL_MANAGER, state)


def zynqmp(tree: SysfsTree, number: int = 0) -> Path:
    """An SoC FPGA: its manager below a platform device, no PCI, no device node."""
    parent = tree.sys / ZYNQMP_PARENT
    parent.mkdir(parents=True)
    return fpga_manager(tree, parent, number, "Xilinx ZynqMP FPGA Manager", "operating")


def fpga_node(tree: SysfsTree, swap_probe_order: bool = False) -> SysfsTree:
    """Two DFL cards, one behind a PCIe bridge; the one at the higher address is probed
    first (fpga0) unless swapped."""
    first, second = (1, 0) if swap_probe_order else (0, 1)
    dfl_card(tree, "0000:af:00.0", fme=0, ports=(0, 1), manager=first)
    dfl_card(tree, "0000:3b:00.0", fme=1, ports=(2,), manager=second, state="write error",
             bridge="0000:3a:00.0")
    return tree


def discover(tree: SysfsTree) -> Inventory:
    return FpgaBackend(BackendContext(node_name=NODE, driver_name="fpga.example.com",
                                      sysfs_root=tree.sys)).discover()


def devices(inventory: Inventory) -> dict[str, Device]:
    return {device.name: device for _, device in inventory.devices()}


def _link(link: Path, target: Path) -> None:
    os.symlink(os.path.relpath(target, link.parent), link)


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    return fpga_node(SysfsTree(tmp_path))


def test_each_card_is_one_exclusive_fpga_named_after_its_pci_address(tree: SysfsTree) -> None:
    inventory = discover(tree)

    [pool] = inventory.pools
    assert pool.name == NODE
    assert [d.name for d in pool.devices] == ["fpga-0000-3b-00-0", "fpga-0000-af-00-0"]
    assert not any(d.allows_multiple_allocations for d in pool.devices)


def test_attributes_come_from_the_manager_files_and_the_pci_address(tree: SysfsTree) -> None:
    card = devices(discover(tree))["fpga-0000-3b-00-0"]  # the card, not its bridge 3a:00.0

    assert card.spec["attributes"] == {
        "type": {"string": "fpga"},
        "manager": {"string": DFL_MANAGER},
        "state": {"string": "write error"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
    }


def test_container_gets_the_cards_own_fme_and_ports(tree: SysfsTree) -> None:
    found = devices(discover(tree))

    # The manager's own platform device (dfl-fme-mgr.N) has no device node.
    assert found["fpga-0000-af-00-0"].container_edits == {"deviceNodes": [
        {"path": "/dev/dfl-fme.0"}, {"path": "/dev/dfl-port.0"}, {"path": "/dev/dfl-port.1"}]}
    assert found["fpga-0000-3b-00-0"].container_edits == {"deviceNodes": [
        {"path": "/dev/dfl-fme.1"}, {"path": "/dev/dfl-port.2"}]}


def test_names_do_not_follow_probe_order(tmp_path: Path) -> None:
    before = discover(fpga_node(SysfsTree(tmp_path / "boot-1")))
    after = discover(fpga_node(SysfsTree(tmp_path / "boot-2"), swap_probe_order=True))

    assert after == before


def test_soc_fpga_without_pci_is_named_after_its_parent_device(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    zynqmp(tree)

    first = discover(tree)
    [device] = devices(first).values()
    assert device.name.startswith("fpga-firmware-zynqmp-firmware-pcap-")  # plus a short hash
    assert device.attribute("state") == "operating"
    assert device.attribute("resource.kubernetes.io/pciBusID") is None
    assert device.container_edits == {}  # no standard node: a real driver adds its own
    assert discover(tree) == first


def test_every_device_passes_api_validation(tree: SysfsTree) -> None:
    zynqmp(tree, number=2)
    long_name = dfl_card(tree, "0000:d8:00.0", fme=2, ports=(3,), manager=3) / "name"
    long_name.write_text("Vendor Programmable Acceleration Card Manager, revision 2 (x16)\n" * 2)

    found = list(devices(discover(tree)).values())

    assert len(found) == 4
    errors = [str(e) for i, d in enumerate(found)
              for e in validate_device(d.to_json(), f"spec.devices[{i}]")]
    assert errors == []


def test_an_unreadable_state_is_published_as_unknown(tree: SysfsTree) -> None:
    (tree.sys / "class/fpga_manager/fpga1/state").unlink()

    assert devices(discover(tree))["fpga-0000-3b-00-0"].attribute("state") == "unknown"


def test_a_node_without_fpga_drivers_has_an_empty_pool(tmp_path: Path) -> None:
    inventory = discover(SysfsTree(tmp_path))

    assert [(p.name, p.devices) for p in inventory.pools] == [(NODE, ())]


def test_a_card_unplugged_during_the_scan_is_skipped(tree: SysfsTree) -> None:
    os.symlink("../../devices/gone/fpga_manager/fpga7", tree.sys / "class/fpga_manager/fpga7")

    assert sorted(devices(discover(tree))) == ["fpga-0000-3b-00-0", "fpga-0000-af-00-0"]
