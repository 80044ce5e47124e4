"""The one interface a device backend implements, and the backends simdra ships.

A driver author adds a device kind by writing one class with `discover()`; the rest of
the plugin (publishing, preparing, health) works from the Inventory it returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from driver.devices.inventory_file import load_inventory_file
from driver.devices.model import Inventory
from driver.devices.profiles import looks_like_path, profile_inventory


class DeviceBackend(Protocol):
    """Finds the devices of this node."""

    def discover(self) -> Inventory:
        """The node's current inventory. Called at start and again on every rescan, so it
        must return the same device names for the same hardware each time."""
        ...


class FakeBackend:
    """Simulated devices: built-in profiles (`gpu`, `nic`, `gpu,nic`) or an inventory file."""

    def __init__(self, profile: str, driver_name: str, node_name: str, num_devices: int) -> None:
        self._profile = profile
        self._driver_name = driver_name
        self._node_name = node_name
        self._num_devices = num_devices

    @property
    def inventory_path(self) -> Path | None:
        """The inventory file this backend reads, when the profile is a path."""
        return Path(self._profile) if looks_like_path(self._profile) else None

    def discover(self) -> Inventory:
        """The simulated inventory; an inventory file is re-read on every call."""
        path = self.inventory_path
        if path is not None:
            return load_inventory_file(path, self._node_name)
        return profile_inventory(self._profile, self._driver_name, self._node_name,
                                 self._num_devices)
