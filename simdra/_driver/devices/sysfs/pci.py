"""PCI functions as sysfs shows them under `<root>/bus/pci/devices`.

In a real kernel each entry there is a symlink into the device hierarchy, e.g.
`bus/pci/devices/0000:3b:00.0 -> ../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0`;
the first directory below `devices/` is the PCI root complex (`pci<domain>:<bus>`), which
the standard attribute `resource.kubernetes.io/pcieRoot` names.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from simdra._driver.devices.sysfs.files import follow, link_name, read_int, resolve

log = logging.getLogger(__name__)

# Extended BDF (domain:bus:device.function) as the standard attribute helpers accept it.
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
# Any PCI function directory name, including the wider domains of VMD-style controllers.
_PCI_NAME = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

DISPLAY_CLASS = 0x03  # PCI base class "display controller" (VGA, XGA, 3D)

VENDOR_NAMES: Mapping[int, str] = {
    0x10DE: "NVIDIA",
    0x1002: "AMD",
    0x1022: "AMD",
    0x8086: "Intel",
    0x1AF4: "virtio",
    0x1234: "QEMU",
    0x1B36: "QEMU",
    0x15AD: "VMware",
    0x1414: "Microsoft",
    0x1A03: "ASPEED",
    0x102B: "Matrox",
    0x15B3: "Mellanox",
    0x14E4: "Broadcom",
    0x1077: "QLogic",
    0x1924: "Solarflare",
    0x1D0F: "Amazon",
    0x1AE0: "Google",
}


@dataclass(frozen=True)
class PciFunction:
    """The facts of one PCI function that device attributes are made of."""

    address: str  # e.g. "0000:3b:00.0", the directory name under bus/pci/devices
    path: Path  # resolved directory under <root>/devices
    class_code: int | None  # 24 bits: base class, subclass, programming interface
    vendor_id: int | None
    device_id: int | None
    numa_node: int | None  # None when the kernel does not know (-1)
    pcie_root: str | None  # e.g. "pci0000:3a"
    kernel_driver: str | None  # the bound driver's name, e.g. "nvidia", "amdgpu"

    @property
    def is_display(self) -> bool:
        """True for display controllers (class 0x03xxxx): GPUs and their kin."""
        return self.class_code is not None and self.class_code >> 16 == DISPLAY_CLASS

    @property
    def vendor_name(self) -> str | None:
        """A readable vendor name for well-known vendor ids, else None."""
        return VENDOR_NAMES.get(self.vendor_id) if self.vendor_id is not None else None


def list_pci_functions(sysfs_root: Path) -> dict[Path, PciFunction]:
    """Every PCI function of the tree, keyed by its resolved directory (for parent lookups).

    A function that vanishes mid-scan is skipped rather than failing the rescan.
    """
    devices_dir = resolve(sysfs_root / "devices")
    bus_dir = resolve(sysfs_root / "bus" / "pci" / "devices")
    if devices_dir is None or bus_dir is None:
        return {}
    found: dict[Path, PciFunction] = {}
    for name in _sorted_names(bus_dir):
        path = follow(bus_dir, name)
        if path is None:
            log.debug("PCI function %s vanished during the scan; skipped", name)
            continue
        found[path] = read_pci_function(name, path, devices_dir)
    return found


def read_pci_function(address: str, path: Path, devices_dir: Path) -> PciFunction:
    """Read one function's identity, NUMA node, root complex and bound driver."""
    numa = read_int(path / "numa_node")
    return PciFunction(
        address=address,
        path=path,
        class_code=read_int(path / "class", 16),
        vendor_id=read_int(path / "vendor", 16),
        device_id=read_int(path / "device", 16),
        numa_node=numa if numa is not None and numa >= 0 else None,
        pcie_root=pcie_root_of(path, devices_dir),
        kernel_driver=link_name(path / "driver"),
    )


def pcie_root_of(path: Path, devices_dir: Path) -> str | None:
    """The root complex (`pci<domain>:<bus>`) above a resolved device path, or None when
    the device does not sit below `<root>/devices/pci*`."""
    try:
        first = path.relative_to(devices_dir).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first.startswith("pci") and ":" in first else None


def owning_function(path: Path, functions: Mapping[Path, PciFunction]) -> PciFunction | None:
    """The PCI function at or above a resolved device path (a netdev's `device` may be a
    child such as `virtio2` of the function), or None."""
    for candidate in (path, *path.parents):
        if _PCI_NAME.match(candidate.name):
            return functions.get(candidate)
    return None


def id_text(value: int | None) -> str | None:
    """A vendor or device id in the form sysfs writes it (`0x10de`)."""
    return None if value is None else f"0x{value:04x}"


def _sorted_names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []
