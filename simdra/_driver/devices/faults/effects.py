"""What the faults in force do to what the plugin publishes (pure): removed devices leave
the inventory, marked devices report UNHEALTHY to the kubelet."""

from __future__ import annotations

import dataclasses

from simdra._driver.core.health import DeviceHealth, HealthStatus
from simdra._driver.devices.faults.state import FaultState
from simdra._driver.devices.model import Inventory


def apply_removals(inventory: Inventory, state: FaultState) -> Inventory:
    """The inventory without removed devices (pools stay, possibly empty)."""
    if not any(f.removed for f in state.entries.values()):
        return inventory
    return Inventory(pools=tuple(
        dataclasses.replace(pool, devices=tuple(
            d for d in pool.devices if not state.is_removed(pool.name, d.name)))
        for pool in inventory.pools
    ))


def health_of(inventory: Inventory, state: FaultState) -> list[DeviceHealth]:
    """Health of every present device: UNHEALTHY with the message when marked."""
    health = []
    for pool, device in inventory.devices():
        if state.is_removed(pool.name, device.name):
            continue
        message = state.unhealthy_message(pool.name, device.name)
        health.append(DeviceHealth(
            pool.name, device.name,
            HealthStatus.HEALTHY if message is None else HealthStatus.UNHEALTHY,
            message=message or "",
        ))
    return health
