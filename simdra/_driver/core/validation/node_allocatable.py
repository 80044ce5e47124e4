"""Rules for a device's `nodeAllocatableResources` (pure), as kube-apiserver 1.37
validates them (KEP-5517, gate DRANodeAllocatableResources).

Each key is a node-allocatable resource name (`cpu`, `memory`, `hugepages-<size>`), never
an extended resource: the scheduler subtracts what a claim maps from the node's
`status.allocatable`. Each value needs `mapping`, `overhead` or both. A mapping takes
exactly one of `capacityKey` (with `capacityMultiplier`: consumed capacity times the
multiplier) and `deviceMultiplier` (allocated devices times the multiplier); the key must
name one of the device's own capacities. An overhead takes `perPod`, `perContainer` or
both, neither negative.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.errors import FieldError, invalid, not_found, required
from simdra._driver.core.validation.inputs import as_map, is_map, quantity_or_none

HUGE_PAGES_PREFIX = "hugepages-"


def is_node_allocatable_resource(name: str) -> bool:
    """True for the resource names a device may map: cpu, memory and huge pages."""
    return name in ("cpu", "memory") or name.startswith(HUGE_PAGES_PREFIX)


def node_allocatable_errors(device: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of the device's `nodeAllocatableResources` (at `path`, the device's path)."""
    capacity = as_map(device.get("capacity"))
    errors: list[FieldError] = []
    for name, entry in as_map(device.get("nodeAllocatableResources")).items():
        where = f"{path}.nodeAllocatableResources[{name}]"
        if not is_node_allocatable_resource(name):
            errors.append(invalid(where, name, "must be a node allocatable resource name"))
        entry = as_map(entry)
        mapping, overhead = entry.get("mapping"), entry.get("overhead")
        if mapping is None and overhead is None:
            errors.append(required(where, "at least one of mapping or overhead must be set"))
        if is_map(mapping):
            errors += _mapping_errors(mapping, capacity, f"{where}.mapping")
        if is_map(overhead):
            errors += _overhead_errors(overhead, f"{where}.overhead")
    return errors


def _mapping_errors(mapping: Mapping[str, Any], capacity: Mapping[str, Any],
                    path: str) -> list[FieldError]:
    key = mapping.get("capacityKey")
    multiplier = mapping.get("capacityMultiplier")
    per_device = mapping.get("deviceMultiplier")
    errors: list[FieldError] = []
    if key is not None:
        if key == "":
            errors.append(invalid(f"{path}.capacityKey", "",
                                  "capacityKey must not be an empty string"))
        elif key not in capacity:
            errors.append(not_found(f"{path}.capacityKey", key))
        if multiplier is None:
            errors.append(required(f"{path}.capacityMultiplier",
                                   "capacityMultiplier is required when capacityKey is set"))
    errors += _positive(multiplier, f"{path}.capacityMultiplier")
    errors += _positive(per_device, f"{path}.deviceMultiplier")
    if multiplier is not None and key is None:
        errors.append(required(f"{path}.capacityKey",
                               "capacityKey is required when capacityMultiplier is set"))
    # The declarative union: exactly one way of counting.
    if key is None and per_device is None:
        errors.append(invalid(path, "", "must specify one of: capacityKey, deviceMultiplier"))
    elif key is not None and per_device is not None:
        errors.append(invalid(path, "{capacityKey, deviceMultiplier}",
                              "must specify exactly one of: capacityKey, deviceMultiplier"))
    return errors


def _overhead_errors(overhead: Mapping[str, Any], path: str) -> list[FieldError]:
    per_pod, per_container = overhead.get("perPod"), overhead.get("perContainer")
    if per_pod is None and per_container is None:
        return [invalid(path, "", "at least one of perPod or perContainer must be set")]
    errors: list[FieldError] = []
    for value, where in ((per_pod, f"{path}.perPod"), (per_container, f"{path}.perContainer")):
        if value is None:
            continue
        amount = quantity_or_none(value)
        if amount is None:
            errors.append(invalid(where, value, "must be a valid quantity"))
        elif amount < 0:
            errors.append(invalid(where, amount, "must be non-negative"))
    return errors


def _positive(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    amount = quantity_or_none(value)
    if amount is None:
        return [invalid(path, value, "must be a valid quantity")]
    return [] if amount > 0 else [invalid(path, amount, "must be positive")]
