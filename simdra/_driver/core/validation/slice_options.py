"""Rules for the ResourceSliceSpec options of Kubernetes 1.37 (pure): `skipNodeOperations`
(KEP-5945, gate DRAOptionalNodeOperations) and `partitionTypeAttribute` (gate
DRAPartitionableDevicesType), as `pkg/apis/resource/validation` and the declarative
tags of `k8s.io/api/resource/v1` check them in 1.37.2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.errors import (
    FieldError,
    duplicate_errors,
    invalid,
    not_supported,
    required,
)
from simdra._driver.core.validation.inputs import as_map
from simdra._driver.core.validation.names import qualified_name_errors

PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"
ALL_OPERATIONS = "*"
# In the order the API server lists them in its "supported values".
SKIP_NODE_OPERATIONS = (ALL_OPERATIONS, PREPARE, UNPREPARE)


def skip_node_operations_errors(operations: Any, path: str) -> list[FieldError]:
    """Errors of `spec.skipNodeOperations`: a set of known operations, and skipping the
    prepare only together with the unprepare (a prepared device must be unprepared)."""
    if operations is None:
        return []
    if not isinstance(operations, list):
        return [invalid(path, type(operations).__name__, "must be a list")]
    errors = duplicate_errors(operations, lambda op: op, path)
    errors += [not_supported(f"{path}[{i}]", op, SKIP_NODE_OPERATIONS)
               for i, op in enumerate(operations) if op not in SKIP_NODE_OPERATIONS]
    named = {op for op in operations if isinstance(op, str)}
    if PREPARE in named and not named & {UNPREPARE, ALL_OPERATIONS}:
        errors.append(invalid(path, operations, f"{PREPARE} cannot be skipped unless "
                                                f"{UNPREPARE} is also skipped"))
    return errors


def skips_prepare(operations: tuple[str, ...] | list[str]) -> bool:
    """True when `operations` lets the kubelet skip NodePrepareResources."""
    return ALL_OPERATIONS in operations or PREPARE in operations


def partition_type_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of `spec.partitionTypeAttribute`: a fully qualified name (`domain/name`),
    only on a slice whose devices consume counters, each of which carries the attribute
    as a string (a name in the driver's own domain may be carried bare)."""
    name = spec.get("partitionTypeAttribute")
    if name is None:
        return []
    where = f"{path}.partitionTypeAttribute"
    errors = qualified_name_errors(name, where)
    if isinstance(name, str) and "/" not in name:
        errors.append(invalid(where, name, "a fully qualified name must be a domain and a "
                                           "name separated by a slash"))
    devices = [as_map(d) for d in spec.get("devices") or [] if isinstance(d, Mapping)]
    if not any(d.get("consumesCounters") for d in devices):
        return [*errors, invalid(where, name, "may only be set on a slice which declares "
                                              "devices that consume counters")]
    if errors:
        return errors  # no device can carry a malformed name
    for i, device in enumerate(spec.get("devices") or []):
        device = as_map(device)
        if not device.get("consumesCounters"):
            continue
        attr_path = f"{path}.devices[{i}].attributes[{name}]"
        value = partition_type_of(device, name, str(spec.get("driver", "")))
        if value is None:
            errors.append(required(attr_path, "device consumes counters and "
                                              "`partitionTypeAttribute` names this attribute, "
                                              "so it must be set"))
        elif not isinstance(as_map(value).get("string"), str):
            errors.append(invalid(attr_path, value, "must be a string value because "
                                  "`partitionTypeAttribute` names this attribute"))
    return errors


def partition_type_of(device: Mapping[str, Any], name: str, driver: str) -> Any:
    """The attribute entry `name` names on `device` (fully qualified, or bare when it is
    in `driver`'s domain; the qualified form wins), or None."""
    attributes = as_map(device.get("attributes"))
    if name in attributes:
        return attributes[name]
    domain, _, bare = name.rpartition("/")
    return attributes.get(bare) if domain == driver and bare else None
