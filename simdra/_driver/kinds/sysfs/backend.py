"""SysfsBackend: the DeviceBackend for real hardware."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from pathlib import Path

from simdra._driver.api import BackendContext, Device, Inventory, Pool
from simdra._driver.kinds.sysfs.cpus import cpu_devices
from simdra._driver.kinds.sysfs.draft import DeviceDraft
from simdra._driver.kinds.sysfs.gpus import gpu_drafts, present_control_nodes
from simdra._driver.kinds.sysfs.nics import NicFallback, nic_draft, read_nics
from simdra._driver.kinds.sysfs.nvml import NvmlSource, PynvmlSource
from simdra._driver.kinds.sysfs.routes import (
    absent_interfaces,
    read_default_routes,
    sysfs_lowers,
    uplink_reasons,
)
from simdra._driver.kinds.sysfs.selection import (
    NO_RULES,
    Rules,
    Selection,
    choose,
)
from simdra.sysfs import (
    link_targets_stamp,
    list_pci_functions,
    listing_stamp,
    parse_selectors,
    read_text,
    unique_names,
)

log = logging.getLogger(__name__)

REAL_SYSFS = Path("/sys")
REAL_PROC = Path("/proc")


class SysfsBackend:
    """GPUs and NICs found in a sysfs tree, in one pool named after the node.

    `sysfs_root`, `dev_root` and `proc_root` default to the host's; tests and containers
    point them elsewhere. `dev_root` is where device nodes are on the host, as the
    container runtime will open them; `proc_root` is where the host's default routes are
    read (`simdra._driver.kinds.sysfs.routes`; default: /proc for the real /sys, else none).
    `rules` refine which devices are left out (`simdra._driver.kinds.sysfs.selection`; by
    default BMC displays and the uplink NICs). NVIDIA GPUs get NVML facts when `nvml`
    (default: pynvml) is available.
    psutil fills interface facts that sysfs leaves unknown, but only for the real `/sys`.
    With `cpus` it also publishes the node's CPUs, one device per NUMA node
    (`simdra._driver.kinds.sysfs.cpus`), which count against the node's allocatable CPU.
    """

    kinds = ("gpu", "nic", "cpu")  # the registered kinds of the devices it publishes

    def __init__(self, sysfs_root: Path = REAL_SYSFS, dev_root: Path = Path("/dev"), *,
                 node_name: str, driver_name: str, include_virtual_nics: bool = False,
                 nvml: NvmlSource | None = None, proc_root: Path | None = None,
                 rules: Rules = NO_RULES, cpus: bool = False) -> None:
        self.sysfs_root = Path(sysfs_root)
        self.dev_root = Path(dev_root)
        # No routes are read for a fake tree unless asked: the host's would not fit it.
        self.proc_root = Path(proc_root) if proc_root is not None else (
            REAL_PROC if self.sysfs_root.resolve() == REAL_SYSFS else None)
        self.rules = rules
        self.node_name = node_name
        self.driver_name = driver_name
        self.include_virtual_nics = include_virtual_nics
        self.cpus = cpus
        self._nvml = nvml if nvml is not None else PynvmlSource()
        self._reported: tuple[object, ...] | None = None  # what the last log line said

    @classmethod
    def from_context(cls, context: BackendContext) -> SysfsBackend:
        """The backend `--device-backend sysfs` makes."""
        rules = Rules(allow=parse_selectors(",".join(context.sysfs_allow)),
                      deny=parse_selectors(",".join(context.sysfs_deny)))
        return cls(context.sysfs_root, context.dev_root, node_name=context.node_name,
                   driver_name=context.driver_name, proc_root=context.proc_root, rules=rules,
                   cpus=context.sysfs_cpus)

    def change_stamp(self) -> Hashable:
        """What changes when a device comes or goes: the PCI functions and the driver
        each is bound to, the network interfaces, the device nodes, the interfaces that
        carry default routes. Attribute values
        (link speed, NVML facts) are left to the plugin's periodic full rescan."""
        pci_dir = self.sysfs_root / "bus" / "pci" / "devices"
        functions = listing_stamp(pci_dir)
        return (functions, link_targets_stamp(pci_dir, functions, "driver"),
                listing_stamp(self.sysfs_root / "class" / "net"), self._cpu_stamp(),
                listing_stamp(self.dev_root), listing_stamp(self.dev_root / "dri"),
                _sorted_items(self._default_routes()))

    def discover(self) -> Inventory:
        """Scan the tree. Names derive from PCI addresses and interface names, so the same
        hardware gets the same names on every call."""
        chosen = self._choose()
        snapshot = self._nvml.snapshot()
        control_nodes = present_control_nodes(self.dev_root) if snapshot else ()
        drafts: list[DeviceDraft] = gpu_drafts(chosen.gpus, snapshot, self.dev_root,
                                               control_nodes)
        drafts += [nic_draft(facts) for facts in chosen.nics]
        devices = name_devices(drafts)
        if self.cpus:
            devices += tuple(cpu_devices(self.sysfs_root, self.driver_name, self.node_name))
        log.debug("sysfs scan of %s found %d devices for pool %s", self.sysfs_root,
                  len(devices), self.node_name)
        return Inventory(pools=(Pool(name=self.node_name, devices=devices),))

    def _cpu_stamp(self) -> object:
        """CPUs coming online or going offline (hotplug) change what is published."""
        return read_text(self.sysfs_root / "devices/system/cpu/online") if self.cpus else None

    def _choose(self) -> Selection:
        """The devices the rules let through; logs what they leave out when that changes."""
        functions = list_pci_functions(self.sysfs_root)
        nics = read_nics(self.sysfs_root, functions, self.include_virtual_nics,
                         self._fallback())
        defaults = self._default_routes()
        uplinks = uplink_reasons(defaults or {}, sysfs_lowers(self.sysfs_root))
        chosen = choose([f for f in functions.values() if f.is_display], nics, uplinks,
                        self.rules)
        self._report(chosen, defaults, absent_interfaces(self.sysfs_root, defaults or {}))
        return chosen

    def _default_routes(self) -> dict[str, str] | None:
        return {} if self.proc_root is None else read_default_routes(self.proc_root)

    def _report(self, chosen: Selection, defaults: dict[str, str] | None,
                unknown_uplinks: list[str]) -> None:
        """One line naming each excluded device and why, at start and on every change;
        a warning when the uplink cannot be told."""
        state = (chosen.excluded, defaults is None, tuple(unknown_uplinks))
        if state == self._reported:
            return
        self._reported = state
        if chosen.excluded:
            log.info("sysfs: not publishing %s (--sysfs-allow overrides a default)",
                     "; ".join(f"{label}: {why}" for label, why in chosen.excluded))
        if defaults is None:
            log.warning("sysfs: cannot read %s/1/net/route or ipv6_route; the node's "
                        "default-route NIC is not recognised (set --proc-root)",
                        self.proc_root)
        elif unknown_uplinks:
            log.warning("sysfs: the default route of %s/1/net goes through %s, which %s "
                        "does not show: --proc-root must show the host's network namespace",
                        self.proc_root, ", ".join(unknown_uplinks), self.sysfs_root)

    def _fallback(self) -> NicFallback | None:
        if self.sysfs_root.resolve() != REAL_SYSFS:
            return None
        from simdra._driver.kinds.sysfs.hostnet import psutil_fallback

        return psutil_fallback()


def _sorted_items(mapping: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    return None if mapping is None else tuple(sorted(mapping.items()))


def name_devices(drafts: list[DeviceDraft]) -> tuple[Device, ...]:
    """Finish drafts under unique names, ordered by name (pure)."""
    names = unique_names([(d.name, d.identity) for d in drafts])
    return tuple(sorted((d.finish(n) for d, n in zip(drafts, names, strict=True)),
                        key=lambda device: device.name))
