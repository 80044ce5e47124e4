"""Inventory -> desired slices per pool (pure): chunking under the API's per-slice limits.

Rules (api-facts 4.2, 4.6; the 1.35+ API):
- at most 128 devices per slice, 64 when any device of the slice uses taints,
  consumesCounters or list-typed attributes (the 1.36 "advanced features" limit; 1.35
  only counts taints and consumesCounters, so the stricter rule is valid everywhere);
- sharedCounters never share a slice with devices, and one slice carries at most 8
  counter sets; counter slices come first so that adding devices never moves them;
- every pool is published with at least one (possibly empty) slice, so an empty pool
  still tells consumers that the driver is alive.

Devices keep their inventory order, which is also the allocator's preference order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from driver.core.validation import (
    MAX_COUNTER_SETS,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
    uses_advanced_features,
)
from driver.devices.model import Inventory, Pool

JSON = dict[str, Any]


@dataclass(frozen=True)
class DesiredSlice:
    """The content of one slice: devices or shared counter sets (never both)."""

    devices: tuple[Mapping[str, Any], ...] = ()
    shared_counters: tuple[Mapping[str, Any], ...] = ()

    def spec_content(self) -> JSON:
        """The content part of `spec` (no driver, node or pool), as v1 JSON."""
        if self.shared_counters:
            return {"sharedCounters": [dict(c) for c in self.shared_counters]}
        return {"devices": [dict(d) for d in self.devices]}


@dataclass(frozen=True)
class DesiredPool:
    """All slices one pool should have, in priority order."""

    name: str
    slices: tuple[DesiredSlice, ...]

    @property
    def device_count(self) -> int:
        """Number of devices over all slices."""
        return sum(len(s.devices) for s in self.slices)


def chunk_devices(devices: tuple[Mapping[str, Any], ...]) -> list[tuple[Mapping[str, Any], ...]]:
    """Split devices, in order, into as few slices as the per-slice limits allow."""
    chunks: list[tuple[Mapping[str, Any], ...]] = []
    current: list[Mapping[str, Any]] = []
    advanced = False
    for device in devices:
        device_advanced = uses_advanced_features(device)
        advanced_limit = advanced or device_advanced
        limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced_limit else MAX_DEVICES_PER_SLICE
        if len(current) + 1 > limit:
            chunks.append(tuple(current))
            current, advanced = [], False
        current.append(device)
        advanced = advanced or device_advanced
    if current:
        chunks.append(tuple(current))
    return chunks


def desired_pool(pool: Pool) -> DesiredPool:
    """The slices for one inventory pool: counter slices first, then device slices."""
    slices: list[DesiredSlice] = []
    counters = tuple(pool.shared_counters)
    for start in range(0, len(counters), MAX_COUNTER_SETS):
        slices.append(DesiredSlice(shared_counters=counters[start : start + MAX_COUNTER_SETS]))
    device_specs = tuple(device.spec for device in pool.devices)
    slices.extend(DesiredSlice(devices=chunk) for chunk in chunk_devices(device_specs))
    if not slices:
        slices.append(DesiredSlice())
    return DesiredPool(name=pool.name, slices=tuple(slices))


def desired_pools(inventory: Inventory) -> dict[str, DesiredPool]:
    """Pool name -> desired slices, for every pool of the inventory (inventory order)."""
    return {pool.name: desired_pool(pool) for pool in inventory.pools}
