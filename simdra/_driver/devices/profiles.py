"""Fake-device mode (`--device-profile`): the profiles the registered kinds declare,
combined into one pool named after the node.

A profile list such as `gpu-shared,nic` names profiles of the registered kinds
(`simdra._driver.devices.kind_registry.KindSet`); `count` devices of each go into the pool. The
profiles of one kind name their devices alike (`gpu-<i>`), so a list takes at most one
profile per kind. A value with a `/` or a YAML/JSON suffix is an inventory file instead
(`simdra._driver.devices.inventory_file`).
"""

from __future__ import annotations

import dataclasses

from simdra._driver.devices.kind import FakeProfile, ProfileContext
from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.devices.model import JSON, Device, Inventory, Pool

INVENTORY_SUFFIXES = (".yaml", ".yml", ".json")


def looks_like_path(profile: str) -> bool:
    """True when a `--device-profile` value names an inventory file rather than profiles:
    it has a `/` or ends in .yaml, .yml or .json. Anything else is read as profile names,
    so a typo (`tpu`) is an unknown profile, not a file that cannot be read."""
    value = profile.strip()
    return "/" in value or value.endswith(INVENTORY_SUFFIXES)


def parse_profiles(profiles: str, kinds: KindSet) -> list[FakeProfile]:
    """The profiles of a `--device-profile` list among the registered `kinds`, checked;
    ValueError names the problem (unknown name, repeated name, two profiles of one
    kind)."""
    known = kinds.profiles()
    names = [p.strip() for p in profiles.split(",")]
    for name in names:
        if name not in known:
            raise ValueError(f"unknown device profile {name!r} (known: {', '.join(sorted(known))})")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"device profile {repeated[0]!r} is listed twice in {profiles!r}")
    for kind in kinds.kinds:
        same = [n for n in names if known[n][0] is kind]
        if len(same) > 1:
            raise ValueError(f"device profiles {' and '.join(same)} are both of kind "
                             f"{kind.name!r} and name their devices alike; use one")
    return [known[name][1] for name in names]


def profile_inventory(profiles: str, driver_name: str, node_name: str, count: int,
                      kinds: KindSet) -> Inventory:
    """`count` physical devices of each profile in `profiles` (e.g. "gpu",
    "gpu-shared,nic", "gpu-partitioned,nic"), in one pool named after the node."""
    context = ProfileContext(driver_name=driver_name, node_name=node_name)
    devices: list[Device] = []
    counters: list[JSON] = []
    partition_types: set[str] = set()
    for profile in parse_profiles(profiles, kinds):
        skip = kinds.profiles()[profile.name][0].skip_node_operations
        for index in range(count):
            made = profile.devices(context, index)
            devices.extend(_skipping(d, skip) for d in made.devices)
            counters.extend(made.shared_counters)
            if made.partition_type_attribute is not None:
                partition_types.add(made.partition_type_attribute)
    if len(partition_types) > 1:
        raise ValueError(f"device profiles {profiles!r} label partitions by different "
                         f"attributes ({', '.join(sorted(partition_types))}); a pool has one")
    pool = Pool(name=node_name, devices=tuple(devices), shared_counters=tuple(counters),
                partition_type_attribute=min(partition_types, default=None))
    return Inventory(pools=(pool,))


def _skipping(device: Device, skip: tuple[str, ...]) -> Device:
    """`device` skipping its kind's node operations, unless it names its own."""
    if not skip or device.skip_node_operations:
        return device
    return dataclasses.replace(device, skip_node_operations=tuple(skip))
