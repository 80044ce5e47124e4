"""A device's `nodeAllocatableResources` as kube-apiserver 1.37 validates it (KEP-5517):
keys are node-allocatable resource names (cpu, memory, hugepages-*), each entry has a
`mapping` or an `overhead`; a mapping counts consumed capacity (`capacityKey`, naming a
capacity of the device, with `capacityMultiplier`) or devices (`deviceMultiplier`),
exactly one of them (the declarative union); multipliers are positive, overheads never
negative.
"""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.apiserver.validation.amounts import amount, text
from simdra._driver.testing.apiserver.validation.field import (
    ErrorType,
    FieldError,
    invalid,
    required,
)

MEMBERS = "capacityKey, deviceMultiplier"


def node_allocatable_errors(device: dict[str, Any], path: str) -> list[FieldError]:
    """Every error of the device's `nodeAllocatableResources` (`path`: the device)."""
    capacity = device.get("capacity") or {}
    errors: list[FieldError] = []
    for name, entry in (device.get("nodeAllocatableResources") or {}).items():
        where = f"{path}.nodeAllocatableResources[{name}]"
        if name not in ("cpu", "memory") and not name.startswith("hugepages-"):
            errors.append(invalid(where, name, "must be a node allocatable resource name"))
        entry = entry if isinstance(entry, dict) else {}
        if entry.get("mapping") is None and entry.get("overhead") is None:
            errors.append(required(where, "at least one of mapping or overhead must be set"))
        if isinstance(entry.get("mapping"), dict):
            errors += _mapping_errors(entry["mapping"], capacity, f"{where}.mapping")
        if isinstance(entry.get("overhead"), dict):
            errors += _overhead_errors(entry["overhead"], f"{where}.overhead")
    return errors


def _mapping_errors(mapping: dict[str, Any], capacity: dict[str, Any],
                    path: str) -> list[FieldError]:
    key, multiplier = mapping.get("capacityKey"), mapping.get("capacityMultiplier")
    per_device = mapping.get("deviceMultiplier")
    errors: list[FieldError] = []
    if key is not None:
        if key == "":
            errors.append(invalid(f"{path}.capacityKey", "",
                                  "capacityKey must not be an empty string"))
        elif key not in capacity:
            errors.append(FieldError(f"{path}.capacityKey", ErrorType.NOT_FOUND, "", key))
        if multiplier is None:
            errors.append(required(f"{path}.capacityMultiplier",
                                   "capacityMultiplier is required when capacityKey is set"))
    for value, where in ((multiplier, "capacityMultiplier"), (per_device, "deviceMultiplier")):
        parsed = amount(value) if value is not None else None
        if parsed is not None and parsed <= 0:
            errors.append(invalid(f"{path}.{where}", text(parsed), "must be positive"))
    if multiplier is not None and key is None:
        errors.append(required(f"{path}.capacityKey",
                               "capacityKey is required when capacityMultiplier is set"))
    if key is None and per_device is None:
        errors.append(invalid(path, "", f"must specify one of: {MEMBERS}"))
    elif key is not None and per_device is not None:
        errors.append(invalid(path, "{capacityKey, deviceMultiplier}",
                              f"must specify exactly one of: {MEMBERS}"))
    return errors


def _overhead_errors(overhead: dict[str, Any], path: str) -> list[FieldError]:
    if overhead.get("perPod") is None and overhead.get("perContainer") is None:
        return [invalid(path, "", "at least one of perPod or perContainer must be set")]
    errors = []
    for where in ("perPod", "perContainer"):
        parsed = amount(overhead.get(where)) if overhead.get(where) is not None else None
        if parsed is not None and parsed < 0:
            errors.append(invalid(f"{path}.{where}", text(parsed), "must be non-negative"))
    return errors
