"""SysfsBackend: the DeviceBackend for real hardware."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from pathlib import Path

from driver.devices.backend import BackendContext
from driver.devices.model import Device, Inventory, Pool
from driver.devices.stamps import link_targets_stamp, listing_stamp
from driver.devices.sysfs.draft import DeviceDraft
from driver.devices.sysfs.gpus import gpu_drafts, present_control_nodes
from driver.devices.sysfs.names import unique_names
from driver.devices.sysfs.nics import NicFallback, nic_draft, read_nics
from driver.devices.sysfs.nvml import NvmlSource, PynvmlSource
from driver.devices.sysfs.pci import list_pci_functions

log = logging.getLogger(__name__)

REAL_SYSFS = Path("/sys")


class SysfsBackend:
    """GPUs and NICs found in a sysfs tree, in one pool named after the node.

    `sysfs_root` and `dev_root` default to the host's; tests and containers point them
    elsewhere. `dev_root` is where device nodes are on the host, as the container runtime
    will open them. NVIDIA GPUs get NVML facts when `nvml` (default: pynvml) is available.
    psutil fills interface facts that sysfs leaves unknown, but only for the real `/sys`.
    """

    device_types = ("gpu", "nic")

    def __init__(self, sysfs_root: Path = REAL_SYSFS, dev_root: Path = Path("/dev"), *,
                 node_name: str, driver_name: str, include_virtual_nics: bool = False,
                 nvml: NvmlSource | None = None) -> None:
        self.sysfs_root = Path(sysfs_root)
        self.dev_root = Path(dev_root)
        self.node_name = node_name
        self.driver_name = driver_name
        self.include_virtual_nics = include_virtual_nics
        self._nvml = nvml if nvml is not None else PynvmlSource()

    @classmethod
    def from_context(cls, context: BackendContext) -> SysfsBackend:
        """The backend `--device-backend sysfs` makes."""
        return cls(context.sysfs_root, context.dev_root, node_name=context.node_name,
                   driver_name=context.driver_name)

    def change_stamp(self) -> Hashable:
        """What changes when a device comes or goes: the PCI functions and the driver
        each is bound to, the network interfaces, the device nodes. Attribute values
        (link speed, NVML facts) are left to the plugin's periodic full rescan."""
        pci_dir = self.sysfs_root / "bus" / "pci" / "devices"
        functions = listing_stamp(pci_dir)
        return (functions, link_targets_stamp(pci_dir, functions, "driver"),
                listing_stamp(self.sysfs_root / "class" / "net"),
                listing_stamp(self.dev_root), listing_stamp(self.dev_root / "dri"))

    def discover(self) -> Inventory:
        """Scan the tree. Names derive from PCI addresses and interface names, so the same
        hardware gets the same names on every call."""
        functions = list_pci_functions(self.sysfs_root)
        snapshot = self._nvml.snapshot()
        control_nodes = present_control_nodes(self.dev_root) if snapshot else ()
        drafts: list[DeviceDraft] = gpu_drafts(functions.values(), snapshot, self.dev_root,
                                               control_nodes)
        nics = read_nics(self.sysfs_root, functions, self.include_virtual_nics,
                         self._fallback())
        drafts += [nic_draft(facts) for facts in nics]
        devices = name_devices(drafts)
        log.debug("sysfs scan of %s found %d devices for pool %s", self.sysfs_root,
                  len(devices), self.node_name)
        return Inventory(pools=(Pool(name=self.node_name, devices=devices),))

    def _fallback(self) -> NicFallback | None:
        if self.sysfs_root.resolve() != REAL_SYSFS:
            return None
        from driver.devices.sysfs.hostnet import psutil_fallback

        return psutil_fallback()


def name_devices(drafts: list[DeviceDraft]) -> tuple[Device, ...]:
    """Finish drafts under unique names, ordered by name (pure)."""
    names = unique_names([(d.name, d.identity) for d in drafts])
    return tuple(sorted((d.finish(n) for d, n in zip(drafts, names, strict=True)),
                        key=lambda device: device.name))
