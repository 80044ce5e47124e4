"""Inventory -> desired slices per pool (pure): chunking under the API's per-slice limits.

Rules (api-facts 4.2, 4.6):
- at most 128 devices per slice, 64 when any device of the slice uses taints,
  consumesCounters or list-typed attributes (the 1.36 "advanced features" limit; 1.35
  only counts taints and consumesCounters, so the stricter rule is valid everywhere);
- node-allocatable mappings go under the field the server's release knows, in its
  shape, or are left out before 1.36 (`SliceLayout`, `release_fields`);
- where counter sets go depends on the server's release (`SliceLayout`): 1.35+ forbid
  them next to devices, so they get slices of their own (at most 8 sets each), first so
  that adding devices never moves them; 1.34 requires each set in the slice of the
  devices that consume it (`slices_with_counters`);
- every pool is published with at least one (possibly empty) slice, so an empty pool
  still tells consumers that the driver is alive;
- `skipNodeOperations` is a slice field: devices that skip different node operations
  (`Device.skip_node_operations`) go to different slices, so a slice never claims a skip
  for a device that needs its prepare; `partitionTypeAttribute` (the pool's) goes on the
  device slices that hold counter consumers, the only ones the API lets carry it. Both
  are 1.37 fields: the 1.34 layout carries neither.

Devices keep their inventory order, which is also the allocator's preference order.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simdra._driver.core.validation import (
    MAX_COUNTER_SETS,
    MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
    uses_advanced_features,
)
from simdra._driver.devices.model import Inventory, Pool
from simdra._driver.slices import release_fields

JSON = dict[str, Any]


class SliceLayout(enum.Enum):
    """How a pool is published for the server's release: where its shared counter sets
    go, and the field its devices' node-allocatable mappings go under
    (`release_fields`)."""

    SEPARATE = "separate"  # 1.37+: counter sets in slices of their own
    SEPARATE_1_36 = "separate-1.36"  # 1.36: the same; mappings as 1.36 named them
    SEPARATE_1_35 = "separate-1.35"  # 1.35: the same; no node-allocatable mappings
    WITH_DEVICES = "with-devices"  # 1.34: in the slice of the devices that consume them

    @property
    def node_allocatable_field(self) -> str | None:
        """The Device field of node-allocatable mappings in this release, if any."""
        if self is SliceLayout.SEPARATE:
            return release_fields.CURRENT
        return release_fields.MAPPINGS_1_36 if self is SliceLayout.SEPARATE_1_36 else None


_RELEASE = re.compile(r"^v?(\d+)\.(\d+)")


def layout_for_release(git_version: str) -> SliceLayout:
    """The layout the API server of this release (its /version `gitVersion`) accepts.
    Anything else (unparseable, an unstamped "v0.0.0" build) gets the current layout."""
    match = _RELEASE.match(git_version.strip())
    if not match or int(match[1]) != 1 or int(match[2]) > 36:
        return SliceLayout.SEPARATE
    return {36: SliceLayout.SEPARATE_1_36, 35: SliceLayout.SEPARATE_1_35}.get(
        int(match[2]), SliceLayout.WITH_DEVICES)


@dataclass(frozen=True)
class DesiredSlice:
    """The content of one slice: devices, shared counter sets, or both (1.34 layout)."""

    devices: tuple[Mapping[str, Any], ...] = ()
    shared_counters: tuple[Mapping[str, Any], ...] = ()
    skip_node_operations: tuple[str, ...] = ()
    partition_type_attribute: str | None = None

    def spec_content(self) -> JSON:
        """The content part of `spec` (no driver, node or pool), as v1 JSON."""
        content: JSON = {}
        if self.shared_counters:
            content["sharedCounters"] = [dict(c) for c in self.shared_counters]
        if self.devices or not self.shared_counters:
            content["devices"] = [dict(d) for d in self.devices]
        if self.skip_node_operations:
            content["skipNodeOperations"] = list(self.skip_node_operations)
        if self.partition_type_attribute is not None:
            content["partitionTypeAttribute"] = self.partition_type_attribute
        return content

    def parts(self) -> tuple[DesiredSlice, ...]:
        """The slice as the 1.35+ rules see it: a slice with both devices and counter
        sets is checked as its two halves (1.34 accepts the pair; its own limits on the
        pair are in `checks`)."""
        if self.devices and self.shared_counters:
            return DesiredSlice(self.devices, (), self.skip_node_operations,
                                self.partition_type_attribute), DesiredSlice(
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
    return _pack([[device] for device in devices])


def desired_pool(pool: Pool, layout: SliceLayout = SliceLayout.SEPARATE) -> DesiredPool:
    """The slices for one inventory pool, counter sets placed as `layout` says."""
    field = layout.node_allocatable_field
    device_specs = tuple(release_fields.device_for_release(device.spec, field)
                         for device in pool.devices)
    counters = tuple(pool.shared_counters)
    slices: list[DesiredSlice] = []
    if layout is SliceLayout.WITH_DEVICES and counters:
        slices.extend(slices_with_counters(counters, device_specs))
    else:
        for start in range(0, len(counters), MAX_COUNTER_SETS):
            slices.append(DesiredSlice(shared_counters=counters[start : start + MAX_COUNTER_SETS]))
        slices.extend(_device_slices(pool, device_specs))
    if not slices:
        slices.append(DesiredSlice())
    return DesiredPool(name=pool.name, slices=tuple(slices))


Spec = Mapping[str, Any]


def _device_slices(pool: Pool, specs: tuple[Spec, ...]) -> list[DesiredSlice]:
    """The device slices of the 1.35+ layout, `specs` being the pool's devices as the
    release takes them: one run of slices per distinct `skip_node_operations` (in order
    of first appearance), each carrying it, and the pool's partition type on those with
    counter consumers."""
    groups: dict[tuple[str, ...], list[Spec]] = {}
    for device, spec in zip(pool.devices, specs, strict=True):
        groups.setdefault(tuple(device.skip_node_operations), []).append(spec)
    slices = []
    for skip, group in groups.items():
        for chunk in chunk_devices(tuple(group)):
            consumers = any(d.get("consumesCounters") for d in chunk)
            partition_type = pool.partition_type_attribute if consumers else None
            slices.append(DesiredSlice(chunk, (), skip, partition_type))
    return slices


def slices_with_counters(
    counters: tuple[Spec, ...], devices: tuple[Spec, ...]
) -> list[DesiredSlice]:
    """The 1.34 layout: devices in inventory order, as few slices as the limits allow,
    each slice holding the counter sets its devices consume; sets nobody consumes last.

    A set's consumers never straddle two slices (the set would be defined twice): the
    devices linked by their sets move as one unit to where the first of them is. Where
    devices are spread over slices the scheduler's preference between the slices is its
    own, so the order is kept as far as it can be."""
    by_name = {str(c.get("name")): c for c in counters}
    root = {name: name for name in by_name}

    def find(name: str) -> str:
        while root[name] != name:
            name = root[name]
        return name

    for device in devices:
        sets = [n for n in _consumed_sets(device) if n in root]
        for other in sets[1:]:
            root[find(other)] = find(sets[0])
    units: dict[object, list[Spec]] = {}
    for index, device in enumerate(devices):
        sets = [n for n in _consumed_sets(device) if n in root]
        units.setdefault(find(sets[0]) if sets else index, []).append(device)
    slices = [_with_sets(chunk, by_name, find) for chunk in _pack(list(units.values()))]
    consumed = {n for s in slices for n in (str(c.get("name")) for c in s.shared_counters)}
    unconsumed = tuple(c for name, c in by_name.items() if name not in consumed)
    if unconsumed:
        slices.append(DesiredSlice(shared_counters=unconsumed))
    return slices


def _pack(units: list[list[Spec]]) -> list[tuple[Spec, ...]]:
    """Units of devices, in order, packed into as few slices as the device limits allow
    (a unit too large for one slice gets a slice of its own, which validation reports)."""
    chunks: list[tuple[Spec, ...]] = []
    current: list[Spec] = []
    advanced = False
    for unit in units:
        unit_advanced = any(uses_advanced_features(device) for device in unit)
        advanced_limit = advanced or unit_advanced
        limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced_limit else MAX_DEVICES_PER_SLICE
        if current and len(current) + len(unit) > limit:
            chunks.append(tuple(current))
            current, advanced = [], False
        current.extend(unit)
        advanced = advanced or unit_advanced
    if current:
        chunks.append(tuple(current))
    return chunks


def _with_sets(chunk: tuple[Spec, ...], by_name: Mapping[str, Spec],
               find: Callable[[str], str]) -> DesiredSlice:
    """A slice of `chunk` and every counter set of the units in it, in inventory order."""
    roots = {find(n) for d in chunk for n in _consumed_sets(d) if n in by_name}
    sets = tuple(c for name, c in by_name.items() if find(name) in roots)
    return DesiredSlice(devices=chunk, shared_counters=sets)


def _consumed_sets(device: Spec) -> Iterable[str]:
    for entry in device.get("consumesCounters") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("counterSet"), str):
            yield entry["counterSet"]


def desired_pools(
    inventory: Inventory, layout: SliceLayout = SliceLayout.SEPARATE
) -> dict[str, DesiredPool]:
    """Pool name -> desired slices, for every pool of the inventory (inventory order)."""
    return {pool.name: desired_pool(pool, layout) for pool in inventory.pools}
