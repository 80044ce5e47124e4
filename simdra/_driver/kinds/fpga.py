"""FPGA cards as exclusive DRA devices: the kind (FpgaKind) and the backend that finds them
in sysfs (FpgaBackend), a worked example of discovering real hardware with `simdra`.

    simdra run --device-backend fpga    # or simdra._driver.kinds.fpga:FpgaBackend

It reads the kernel's FPGA manager class (Documentation/ABI/testing/
sysfs-class-fpga-manager): one `<sysfs>/class/fpga_manager/fpga<N>` per FPGA, with
`name` (the manager driver, e.g. "DFL FME FPGA Manager") and `state` ("operating",
"write error", ...; Intel's DFL manager says "unknown" until a bitstream is loaded
through it). Each entry links into the device tree, so a PCI function above it is the
card's PCI address. The DFL driver puts the manager below the card's management engine::

    devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/fpga_region/region0/
        dfl-fme.0/dfl-fme-mgr.0/fpga_manager/fpga0
        dfl-port.0/

The FME and the ports beside it (one accelerator each) are character devices (they
have a `dev` file) that udev names `/dev/dfl-fme.0` and `/dev/dfl-port.0`; a container
given the card gets them all. Other managers (e.g. Xilinx ZynqMP) have no such node and
the card is published without container edits: a real driver adds its vendor's nodes.

Names must survive restarts, and `fpga<N>` is numbered in probe order, so a card is
named after its PCI address (`fpga-0000-3b-00-0`), else after the device its manager
belongs to (a device-tree name such as `firmware:zynqmp-firmware:pcap`).

Left out, as an example should: health from the `status` file, loading bitstreams,
ports moved to SR-IOV VFs. Publishing, prepare, CDI specs and the checkpoint are the
plugin's; this file only says what the node has.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from simdra._driver.api import JSON, PCI_BUS_ID, BackendContext, Device, DeviceKind, Inventory, Pool
from simdra.sysfs import label, read_text, resolve, string_attr, unique_names

_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_DFL_FME = re.compile(r"^dfl-fme\.\d+$")
_DFL_NODE = re.compile(r"^dfl-(fme|port)\.\d+$")


@dataclass(frozen=True)
class FpgaCard:
    """What sysfs says about one FPGA manager: step 1, read."""

    manager: str  # "fpga0": the class entry, numbered in probe order
    manager_name: str | None  # the `name` file
    state: str | None  # the `state` file
    pci_address: str | None  # the PCI function above the manager, if any
    parent: str | None  # the device the manager belongs to ("dfl-fme-mgr.0", ...)
    dev_nodes: tuple[str, ...]  # DFL character devices: ("dfl-fme.0", "dfl-port.0")

    @property
    def identity(self) -> str:
        """What the name derives from: stable across reboots, unlike `fpga<N>`."""
        return self.pci_address or self.parent or self.manager


class FpgaKind(DeviceKind):
    """FPGA cards found in sysfs (--device-backend fpga), except those whose last programming
    failed."""

    name = "fpga"
    # What a workload needs to know about its card, besides name, pool and type.
    env_attributes = {"manager": "MANAGER", "state": "STATE", PCI_BUS_ID: "PCI_BUS_ID"}
    device_class_condition = '!device.attributes["DRIVER"].state.endsWith("error")'


class FpgaBackend:
    """The DeviceBackend: every FPGA manager under `context.sysfs_root`, in one pool
    named after the node."""

    kinds = (FpgaKind,)

    def __init__(self, context: BackendContext) -> None:
        self.sysfs_root = Path(context.sysfs_root)
        self.pool = context.node_name

    def discover(self) -> Inventory:
        """Read the tree, then build devices from what was read."""
        devices = fpga_devices(read_cards(self.sysfs_root))
        return Inventory(pools=(Pool(name=self.pool, devices=devices),))


def read_cards(sysfs_root: Path) -> list[FpgaCard]:
    """Every FPGA manager of the tree; none when no FPGA driver is loaded."""
    class_dir = sysfs_root / "class" / "fpga_manager"
    devices_dir = resolve(sysfs_root / "devices")
    try:
        entries = sorted(os.listdir(class_dir))
    except OSError:
        return []
    cards = [read_card(class_dir / entry, devices_dir) for entry in entries]
    return [card for card in cards if card is not None]  # None: unplugged mid-scan


def read_card(entry: Path, devices_dir: Path | None) -> FpgaCard | None:
    """One manager's files, and what lies above it in the device tree."""
    path = resolve(entry)
    if path is None or devices_dir is None:
        return None
    above = [p for p in path.parents if p.is_relative_to(devices_dir)]
    fme = next((p for p in above if _DFL_FME.match(p.name)), None)
    parent = resolve(path / "device")
    return FpgaCard(
        manager=entry.name,
        manager_name=read_text(path / "name"),
        state=read_text(path / "state"),
        pci_address=next((p.name for p in above if _PCI_ADDRESS.match(p.name)), None),
        parent=parent.name if parent is not None else None,
        dev_nodes=dfl_nodes(fme.parent) if fme is not None else (),
    )


def dfl_nodes(region: Path) -> tuple[str, ...]:
    """The FME and ports of a DFL card: entries of its region that have a device node."""
    try:
        names = sorted(os.listdir(region))
    except OSError:
        return ()
    return tuple(n for n in names if _DFL_NODE.match(n) and (region / n / "dev").is_file())


def fpga_devices(cards: list[FpgaCard]) -> tuple[Device, ...]:
    """Step 2, pure: cards -> devices with stable names, ordered by name."""
    names = unique_names([(label("fpga", c.identity), c.identity) for c in cards])
    devices = [fpga_device(name, card) for name, card in zip(names, cards, strict=True)]
    return tuple(sorted(devices, key=lambda device: device.name))


def fpga_device(name: str, card: FpgaCard) -> Device:
    """One card as an exclusive device: attributes for selectors, device nodes for CDI."""
    attributes: JSON = {"type": string_attr("fpga")}
    if card.manager_name:
        attributes["manager"] = string_attr(card.manager_name)
    # Always present, so a selector on it never meets a missing key; "unknown" is the
    # kernel's own word for a state it cannot tell.
    attributes["state"] = string_attr(card.state or "unknown")
    if card.pci_address:
        attributes[PCI_BUS_ID] = string_attr(card.pci_address)
    edits: JSON = {}
    if card.dev_nodes:
        edits["deviceNodes"] = [{"path": f"/dev/{node}"} for node in card.dev_nodes]
    return Device(spec={"name": name, "attributes": attributes}, container_edits=edits)
