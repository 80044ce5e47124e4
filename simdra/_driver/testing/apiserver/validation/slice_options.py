"""The ResourceSlice fields Kubernetes 1.37 added, as kube-apiserver 1.37.2 validates
them: `spec.skipNodeOperations` (gate DRAOptionalNodeOperations), a consumption's
`compatibilityGroups` (DRADeviceCompatibilityGroups) and `spec.partitionTypeAttribute`
(DRAPartitionableDevicesType). Gated fields reach these rules only with their gate on:
the store drops them before (`simdra._driver.testing.apiserver.gates`)."""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
    too_many,
)

JSON = dict[str, Any]
_OPERATIONS = ("*", "NodePrepareResources", "NodeUnprepareResources")
_MAX_GROUPS = 2


def _unique(values: list[Any], path: str) -> list[FieldError]:
    seen: list[Any] = []
    errors = []
    for i, value in enumerate(values):
        if value in seen:
            errors.append(duplicate(f"{path}[{i}]", value))
        seen.append(value)
    return errors


def skip_operations_errors(operations: Any, path: str) -> list[FieldError]:
    """A set of known operations; the prepare skipped only with the unprepare."""
    if not isinstance(operations, list):
        return []
    errors = _unique(operations, path)
    errors += [not_supported(f"{path}[{i}]", op, _OPERATIONS)
               for i, op in enumerate(operations) if op not in _OPERATIONS]
    if ("NodePrepareResources" in operations
            and not {"NodeUnprepareResources", "*"} & set(operations)):
        errors.append(invalid(path, operations, "NodePrepareResources cannot be skipped "
                                                "unless NodeUnprepareResources is also skipped"))
    return errors


def compatibility_groups_errors(groups: Any, path: str) -> list[FieldError]:
    """At most two short (DNS label) names, each once."""
    if not isinstance(groups, list) or not groups:
        return []
    if len(groups) > _MAX_GROUPS:
        return [too_many(f"{path}", len(groups), _MAX_GROUPS)]
    errors = [e for i, g in enumerate(groups) for e in formats.dns_label(g, f"{path}[{i}]")]
    return errors + _unique(groups, path)


def partition_type_errors(spec: JSON) -> list[FieldError]:
    """A fully qualified name, on a slice whose counter consumers all carry it as a
    string (bare where the name is in the driver's domain)."""
    name = spec.get("partitionTypeAttribute")
    if name is None:
        return []
    where = "spec.partitionTypeAttribute"
    errors = formats.fully_qualified_name(name, where)
    devices = [d for d in spec.get("devices") or [] if isinstance(d, dict)]
    if not any(d.get("consumesCounters") for d in devices):
        return [*errors, invalid(where, name, "may only be set on a slice which declares "
                                              "devices that consume counters")]
    if errors:
        return errors
    domain, _, bare = str(name).rpartition("/")
    for i, device in enumerate(spec.get("devices") or []):
        if not isinstance(device, dict) or not device.get("consumesCounters"):
            continue
        attributes = device.get("attributes") or {}
        value = attributes.get(name)
        if value is None and domain == spec.get("driver"):
            value = attributes.get(bare)
        path = f"spec.devices[{i}].attributes[{name}]"
        if value is None:
            errors.append(required(path, "device consumes counters and "
                                         "`partitionTypeAttribute` names this attribute, so "
                                         "it must be set"))
        elif not isinstance(value, dict) or not isinstance(value.get("string"), str):
            errors.append(invalid(path, value, "must be a string value because "
                                               "`partitionTypeAttribute` names this attribute"))
    return errors
