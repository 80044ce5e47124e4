"""Inventory -> desired slices per pool (pure): chunking under the API's per-slice limits.

Rules (api-facts 4.2, 4.6):
- at most 128 devices per slice, 64 when any device of the slice uses taints,
  consumesCounters or list-typed attributes (the 1.36 "advanced features" limit; 1.35
  only counts taints and consumesCounters, so the stricter rule is valid everywhere);
- where counter sets go depends on the server's release (`SliceLayout`): 1.35+ forbid
  them next to devices, so they get slices of their own (at most 8 sets each), first so
  that adding devices never moves them; 1.34 requires each set in the slice of the
  devices that consume it, so a group of sets linked by their devices shares one slice
  with those devices;
- every pool is published with at least one (possibly empty) slice, so an empty pool
  still tells consumers that the driver is alive.

Devices keep their inventory order, which is also the allocator's preference order.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
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


class SliceLayout(enum.Enum):
    """Where a pool's shared counter sets are published."""

    SEPARATE = "separate"  # 1.35+: in slices of their own
    WITH_DEVICES = "with-devices"  # 1.34: in the slice of the devices that consume them


_RELEASE = re.compile(r"^v?(\d+)\.(\d+)")


def layout_for_release(git_version: str) -> SliceLayout:
    """The layout the API server of this release (its /version `gitVersion`) accepts.
    Anything else (unparseable, an unstamped "v0.0.0" build) gets the current layout."""
    match = _RELEASE.match(git_version.strip())
    if match and int(match[1]) == 1 and int(match[2]) < 35:
        return SliceLayout.WITH_DEVICES
    return SliceLayout.SEPARATE


@dataclass(frozen=True)
class DesiredSlice:
    """The content of one slice: devices, shared counter sets, or both (1.34 layout)."""

    devices: tuple[Mapping[str, Any], ...] = ()
    shared_counters: tuple[Mapping[str, Any], ...] = ()

    def spec_content(self) -> JSON:
        """The content part of `spec` (no driver, node or pool), as v1 JSON."""
        content: JSON = {}
        if self.shared_counters:
            content["sharedCounters"] = [dict(c) for c in self.shared_counters]
        if self.devices or not self.shared_counters:
            content["devices"] = [dict(d) for d in self.devices]
        return content

    def parts(self) -> tuple[DesiredSlice, ...]:
        """The slice as the 1.35+ rules see it: a slice with both devices and counter
        sets is checked as its two halves (1.34 accepts the pair; its own limits on the
        pair are in `checks`)."""
        if self.devices and self.shared_counters:
            return DesiredSlice(devices=self.devices), DesiredSlice(
                shared_counters=self.shared_counters)
        return (self,)


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


def desired_pool(pool: Pool, layout: SliceLayout = SliceLayout.SEPARATE) -> DesiredPool:
    """The slices for one inventory pool, counter sets placed as `layout` says."""
    device_specs = tuple(device.spec for device in pool.devices)
    counters = tuple(pool.shared_counters)
    slices: list[DesiredSlice] = []
    if layout is SliceLayout.WITH_DEVICES and counters:
        groups, device_specs = counter_groups(counters, device_specs)
        slices.extend(DesiredSlice(devices=d, shared_counters=c) for c, d in groups)
    else:
        for start in range(0, len(counters), MAX_COUNTER_SETS):
            slices.append(DesiredSlice(shared_counters=counters[start : start + MAX_COUNTER_SETS]))
    slices.extend(DesiredSlice(devices=chunk) for chunk in chunk_devices(device_specs))
    if not slices:
        slices.append(DesiredSlice())
    return DesiredPool(name=pool.name, slices=tuple(slices))


Specs = tuple[Mapping[str, Any], ...]


def counter_groups(counters: Specs, devices: Specs) -> tuple[list[tuple[Specs, Specs]], Specs]:
    """Counter sets grouped with the devices that consume them (the 1.34 layout), and the
    devices that consume none of them.

    Two sets are in one group when a device consumes both: the group's slice must define
    every set its devices name. Groups follow the order of their first set."""
    names = [str(c.get("name")) for c in counters]
    root = {name: name for name in names}

    def find(name: str) -> str:
        while root[name] != name:
            name = root[name]
        return name

    consumed: list[list[str]] = []
    for device in devices:
        sets = [n for n in _consumed_sets(device) if n in root]
        for other in sets[1:]:
            root[find(other)] = find(sets[0])
        consumed.append(sets)
    groups: dict[str, tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = {}
    for name, counter_set in zip(names, counters, strict=True):
        groups.setdefault(find(name), ([], []))[0].append(counter_set)
    rest = []
    for device, sets in zip(devices, consumed, strict=True):
        if sets:
            groups[find(sets[0])][1].append(device)
        else:
            rest.append(device)
    return [(tuple(c), tuple(d)) for c, d in groups.values()], tuple(rest)


def _consumed_sets(device: Mapping[str, Any]) -> Iterable[str]:
    for entry in device.get("consumesCounters") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("counterSet"), str):
            yield entry["counterSet"]


def desired_pools(
    inventory: Inventory, layout: SliceLayout = SliceLayout.SEPARATE
) -> dict[str, DesiredPool]:
    """Pool name -> desired slices, for every pool of the inventory (inventory order)."""
    return {pool.name: desired_pool(pool, layout) for pool in inventory.pools}
