"""Validation of a whole ResourceSlice object and of updates to one (pure): metadata,
driver, pool, node selection, the devices list and shared counters (api-facts 4.2-4.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.counters import counter_sets_errors
from simdra._driver.core.validation.device import validate_device
from simdra._driver.core.validation.errors import (
    FieldError,
    duplicate_errors,
    invalid,
    required,
    too_many,
)
from simdra._driver.core.validation.inputs import as_map, is_map, is_set
from simdra._driver.core.validation.limits import device_limit
from simdra._driver.core.validation.names import (
    dns_subdomain_errors,
    driver_name_errors,
    pool_name_errors,
)
from simdra._driver.core.validation.node_selection import slice_node_selection_errors
from simdra._driver.core.validation.slice_options import (
    partition_type_errors,
    skip_node_operations_errors,
)


def validate_slice(slice_obj: Mapping[str, Any]) -> list[FieldError]:
    """All semantic errors of a ResourceSlice object, in the API server's order."""
    if not is_map(slice_obj):
        return [invalid("<root>", type(slice_obj).__name__, "must be a JSON object")]
    errors = _metadata_errors(as_map(slice_obj.get("metadata")))
    spec = slice_obj.get("spec")
    if not is_map(spec):
        return [*errors, required("spec")]
    return errors + validate_slice_spec(spec, "spec")


def validate_slice_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Errors of an update: the new object's errors plus changes to immutable fields."""
    return validate_slice(new) + immutable_field_errors(new, old)


def immutable_field_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Changes to the fields a ResourceSlice keeps for life: driver, pool name, node name."""
    new_spec, old_spec = as_map(new.get("spec")), as_map(old.get("spec"))
    immutable = (
        (
            "spec.pool.name",
            as_map(new_spec.get("pool")).get("name"),
            as_map(old_spec.get("pool")).get("name"),
        ),
        ("spec.driver", new_spec.get("driver"), old_spec.get("driver")),
        ("spec.nodeName", new_spec.get("nodeName"), old_spec.get("nodeName")),
    )
    return [
        invalid(path, now, "field is immutable") for path, now, before in immutable if now != before
    ]


def validate_slice_spec(spec: Mapping[str, Any], path: str = "spec") -> list[FieldError]:
    """Errors of a ResourceSliceSpec (api-facts 4.2, 4.3, 4.6)."""
    errors = driver_name_errors(spec.get("driver"), f"{path}.driver")
    errors += _pool_errors(spec.get("pool"), f"{path}.pool")
    errors += slice_node_selection_errors(spec, path)
    if is_set(spec.get("sharedCounters")) and is_set(spec.get("devices")):
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    errors += _devices_errors(spec, f"{path}.devices")
    errors += counter_sets_errors(spec.get("sharedCounters"), f"{path}.sharedCounters")
    errors += partition_type_errors(spec, path)
    errors += skip_node_operations_errors(spec.get("skipNodeOperations"),
                                          f"{path}.skipNodeOperations")
    return errors


def _metadata_errors(meta: Mapping[str, Any]) -> list[FieldError]:
    name = meta.get("name")
    if not name:
        if meta.get("generateName"):
            return []
        return [required("metadata.name", "name or generateName is required")]
    return dns_subdomain_errors(name, "metadata.name")


def _pool_errors(pool: Any, path: str) -> list[FieldError]:
    if not is_map(pool):
        return [required(path)]
    errors = pool_name_errors(pool.get("name"), f"{path}.name")
    count = pool.get("resourceSliceCount")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        errors.append(invalid(f"{path}.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation", 0)
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        errors.append(
            invalid(f"{path}.generation", generation, "must be greater than or equal to zero")
        )
    return errors


def _devices_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    devices = spec.get("devices")
    if devices is None:
        return []
    if not isinstance(devices, list):
        return [invalid(path, type(devices).__name__, "must be a list")]
    limit = device_limit(devices)
    if len(devices) > limit:
        # The API server stops here: checking each of too many devices is wasted work.
        return [too_many(path, len(devices), limit)]
    per_device = spec.get("perDeviceNodeSelection") is True
    errors: list[FieldError] = []
    for i, device in enumerate(devices):
        errors += validate_device(device, f"{path}[{i}]", per_device_node_selection=per_device)
    errors += duplicate_errors(devices, lambda d: as_map(d).get("name"), path)
    return errors
