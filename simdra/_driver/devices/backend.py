"""The one interface a device backend implements, what it is given, and the fake backend.

A backend says where devices come from: one class with `discover()`; the rest of the
plugin (publishing, preparing, health) works from the Inventory it returns. What its
devices are, the claim side included, is said by device kinds (`simdra._driver.devices.kind`):
an optional class attribute `kinds` lists the kinds it publishes, as registered names
(`"gpu"`) or DeviceKind classes it brings along (registered with it).

An optional method makes idle rescans cheap: `change_stamp()` returns a hashable value
that differs whenever `discover()` might return something different (e.g. directory
listings, a file's inode and mtime; `simdra._driver.devices.stamps`). While it stays the same
the plugin skips the full discover, except every `full_rescan_interval` (see
`simdra._driver.devices.live.LiveDevices`). A backend without it is discovered on every rescan.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from simdra._driver.config import Config

from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.devices.model import Inventory
from simdra._driver.devices.profiles import looks_like_path, profile_inventory
from simdra._driver.devices.stamps import file_stamp


@dataclass(frozen=True)
class BackendContext:
    """What a backend is given at start: the `simdra run` settings about devices, not
    the whole plugin configuration.

    Example (in a backend's test, built as the plugin builds it)::

        backend = FpgaBackend(BackendContext(node_name="node-1",
                                             driver_name="dra.example.com",
                                             sysfs_root=tree / "sys"))
    """

    node_name: str  # also the usual pool name
    driver_name: str
    device_profile: str = "gpu"  # --device-profile: a profile list or an inventory path
    num_devices: int = 8  # --num-devices
    sysfs_root: Path = Path("/sys")  # --sysfs-root
    dev_root: Path = Path("/dev")  # --dev-root
    proc_root: Path | None = None  # --proc-root (None: /proc for the real /sys only)
    sysfs_allow: tuple[str, ...] = ()  # --sysfs-allow selectors, e.g. "pci:0000:3b:00.0"
    sysfs_deny: tuple[str, ...] = ()  # --sysfs-deny selectors
    # The registered kinds: the plugin's catalog's and --kind's (none when built by hand).
    kinds: KindSet = field(default_factory=lambda: KindSet(()))
    sysfs_cpus: bool = False  # --sysfs-cpus

    @classmethod
    def from_config(cls, config: Config, kinds: KindSet) -> BackendContext:
        """The context of a plugin configuration with its registered kinds."""
        return cls(node_name=config.node_name, driver_name=config.driver_name,
                   device_profile=config.device_profile, num_devices=config.num_devices,
                   sysfs_root=Path(config.sysfs_root), dev_root=Path(config.dev_root),
                   proc_root=config.proc_root, sysfs_allow=config.sysfs_allow,
                   sysfs_deny=config.sysfs_deny, kinds=kinds, sysfs_cpus=config.sysfs_cpus)


class DeviceBackend(Protocol):
    """Finds the devices of this node. Constructed once as `Backend(context)` with a
    BackendContext (built-in backends with other constructors offer `from_context`).

    Example (run with `simdra run --device-backend my_driver.backend:CardBackend`)::

        class CardBackend:  # a DeviceBackend: a structural protocol, no base class
            def __init__(self, context: BackendContext) -> None:
                self.context = context

            def discover(self) -> Inventory:
                devices = tuple(card_device(c) for c in read_cards(self.context.sysfs_root))
                return Inventory(pools=(Pool(self.context.node_name, devices),))
    """

    def discover(self) -> Inventory:
        """The node's current inventory. Called at start and again on every rescan, so it
        must return the same device names for the same hardware each time."""
        ...


class FakeBackend:
    """Simulated devices: the registered kinds' profiles (`gpu`, `nic`, `gpu,nic`, ...) or
    an inventory file."""

    def __init__(self, profile: str, driver_name: str, node_name: str, num_devices: int,
                 kinds: KindSet) -> None:
        self._profile = profile
        self._driver_name = driver_name
        self._node_name = node_name
        self._num_devices = num_devices
        self._kinds = kinds

    @classmethod
    def from_context(cls, context: BackendContext) -> FakeBackend:
        """The fake backend `--device-backend fake` makes."""
        return cls(context.device_profile, context.driver_name, context.node_name,
                   context.num_devices, context.kinds)


    @property
    def inventory_path(self) -> Path | None:
        """The inventory file this backend reads, when the profile is a path."""
        return Path(self._profile) if looks_like_path(self._profile) else None

    def change_stamp(self) -> Hashable:
        """Built-in profiles never change; an inventory file changes with its stamp."""
        path = self.inventory_path
        if path is not None:
            return "file", file_stamp(path)
        return "profile", self._profile, self._num_devices

    def discover(self) -> Inventory:
        """The simulated inventory; an inventory file is re-read on every call."""
        path = self.inventory_path
        if path is not None:
            # Imported here: YAML and the API server's rules are for inventory files
            # only, and `simdra run` checks its flags (importing this) before it serves.
            from simdra._driver.devices.inventory_file import load_inventory_file

            return load_inventory_file(path, self._node_name, self._driver_name)
        return profile_inventory(self._profile, self._driver_name, self._node_name,
                                 self._num_devices, self._kinds)
