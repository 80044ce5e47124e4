"""One `spec.devices[]` entry of a ResourceSlice, as kube-apiserver 1.36 validates it.

A device is a DNS-label name and maps and lists whose sizes come from `sizes`: attributes
(exactly one value each), capacities (with a request policy only when shared), taints,
counter consumption, its own node selection under `perDeviceNodeSelection`, and binding
conditions, and node-allocatable mappings (1.37). Map keys are checked on the map's path,
values at `map[key]`.
"""

from __future__ import annotations

import re
from typing import Any

from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
    too_long,
)
from simdra._driver.testing.apiserver.validation.node_allocatable import node_allocatable_errors
from simdra._driver.testing.apiserver.validation.nodes import device_nodes_errors
from simdra._driver.testing.apiserver.validation.request_policy import capacity_errors
from simdra._driver.testing.apiserver.validation.sizes import (
    MAX_ATTRIBUTE_VALUE_BYTES,
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    each_entry,
    each_item,
    each_unique_item,
)
from simdra._driver.testing.apiserver.validation.slice_options import compatibility_groups_errors

SCALARS = ("bool", "int", "string", "version")
LISTS = ("bools", "ints", "strings", "versions")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as the server lists them
_N = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_SEMVER = re.compile(
    rf"^{_N}\.{_N}\.{_N}(-{_PRE}(\.{_PRE})*)?(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)


def device_errors(
    device: Any, path: str, per_device_nodes: bool, before: dict[str, Any] | None = None
) -> list[FieldError]:
    """Every error of the device at `path` (`spec.devices[i]`).

    `before` is the stored device of the same name on an update: capacities and taints
    left as they were are not checked again (the server's ratcheting), so a slice stored
    under older rules stays writable.
    """
    device = device if isinstance(device, dict) else {}
    shared = device.get("allowMultipleAllocations") is True
    errors = formats.dns_label(device.get("name", ""), f"{path}.name")
    errors += _size_errors(device, path)
    errors += each_entry(
        device.get("attributes"), f"{path}.attributes", formats.qualified_name, attribute_errors
    )
    if before is None or before.get("capacity") != device.get("capacity"):
        errors += each_entry(
            device.get("capacity"),
            f"{path}.capacity",
            formats.qualified_name,
            lambda capacity, where: capacity_errors(capacity, shared, where),
        )
    if before is None or before.get("taints") != device.get("taints"):
        errors += each_item(device.get("taints"), f"{path}.taints", _taint_errors)
    errors += each_unique_item(
        device.get("consumesCounters"),
        f"{path}.consumesCounters",
        _consumption_errors,
        lambda entry: str(entry.get("counterSet", "")) if isinstance(entry, dict) else "",
    )
    errors += device_nodes_errors(device, per_device_nodes, path)
    errors += binding_errors(device, path)
    return errors + node_allocatable_errors(device, path)


def _size_errors(device: dict[str, Any], path: str) -> list[FieldError]:
    attributes = device.get("attributes") or {}
    names = len(attributes) + len(device.get("capacity") or {})
    errors = []
    if names > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = "the total number of attributes and capacities must not exceed"
        errors.append(invalid(path, names, f"{detail} {MAX_ATTRIBUTES_AND_CAPACITIES}"))
    values = sum(_value_count(a) for a in attributes.values())
    if values > MAX_ATTRIBUTE_VALUES:
        detail = "the total number of attribute values must not exceed"
        errors.append(invalid(path, values, f"{detail} {MAX_ATTRIBUTE_VALUES}"))
    return errors


def _value_count(attribute: Any) -> int:
    """A scalar counts once, a list by its items (an attribute of empty lists once)."""
    attribute = attribute if isinstance(attribute, dict) else {}
    items = sum(len(attribute.get(k) or []) for k in LISTS)
    return items or 1


def attribute_errors(attribute: Any, path: str) -> list[FieldError]:
    """One DeviceAttribute: exactly one of its value fields, each value well formed."""
    attribute = attribute if isinstance(attribute, dict) else {}
    present = [k for k in (*SCALARS, *LISTS) if attribute.get(k) is not None]
    # 1.37's declarative union check does not count an empty list as a value.
    counted = [k for k in present if k not in LISTS or attribute[k]]
    errors: list[FieldError] = []
    for key in present:
        value, where = attribute[key], f"{path}.{key}"
        if key in LISTS and not value:
            errors.append(invalid(where, value, "must not be empty if specified"))
        if key in ("string", "version"):
            errors += _text_errors(key, value, where)
        elif key in ("strings", "versions"):
            for i, item in enumerate(value):
                errors += _text_errors(key[:-1], item, f"{where}[{i}]")
    if len(counted) != 1:
        shown = attribute if counted else ""
        errors.append(invalid(path, shown, "exactly one value must be specified"))
    return errors


def _text_errors(kind: str, value: Any, path: str) -> list[FieldError]:
    text = str(value)
    errors = []
    if kind == "version" and not _SEMVER.match(text):
        errors.append(invalid(path, text, "must be a string compatible with semver.org spec 2.0.0"))
    if len(text.encode()) > MAX_ATTRIBUTE_VALUE_BYTES:
        errors.append(too_long(path, MAX_ATTRIBUTE_VALUE_BYTES))
    return errors


def _taint_errors(taint: Any, path: str) -> list[FieldError]:
    taint = taint if isinstance(taint, dict) else {}
    errors = formats.label_name(taint.get("key", ""), f"{path}.key")
    if taint.get("value"):
        errors += formats.label_value(taint["value"], f"{path}.value")
    effect = taint.get("effect") or ""
    if not effect:
        errors.append(required(f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        errors.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return errors


def _consumption_errors(entry: Any, path: str) -> list[FieldError]:
    entry = entry if isinstance(entry, dict) else {}
    return counter_map_errors(entry, "counterSet", path) + compatibility_groups_errors(
        entry.get("compatibilityGroups"), f"{path}.compatibilityGroups")


def counter_map_errors(owner: dict[str, Any], name_field: str, path: str) -> list[FieldError]:
    """A counter set (`name`) or a device's consumption of one (`counterSet`): a DNS-label
    name and 1 to 32 counters named as DNS labels (any decoded quantity is a valid value)."""
    name = owner.get(name_field) or ""
    errors = (
        formats.dns_label(name, f"{path}.{name_field}")
        if name
        else [required(f"{path}.{name_field}")]
    )
    counters = owner.get("counters")
    if not counters:
        return [*errors, required(f"{path}.counters")]
    return errors + each_entry(counters, f"{path}.counters", formats.dns_label)


def binding_errors(device: dict[str, Any], path: str) -> list[FieldError]:
    """bindingConditions and bindingFailureConditions: at most 4 label-style names each,
    no repeats, no name in both, and neither list without the other."""
    conditions = device.get("bindingConditions") or []
    failures = device.get("bindingFailureConditions") or []
    errors: list[FieldError] = []
    for field_name, names in (
        ("bindingConditions", conditions),
        ("bindingFailureConditions", failures),
    ):
        where = f"{path}.{field_name}"
        errors += each_item(names, where, formats.label_name)
        errors += [duplicate(f"{where}[{i}]", n) for i, n in enumerate(names) if n in names[:i]]
    overlap = "bindingFailureConditions must not overlap with bindingConditions"
    errors += [
        invalid(f"{path}.bindingFailureConditions[{i}]", n, overlap)
        for i, n in enumerate(failures)
        if n in conditions
    ]
    if failures and not conditions:
        detail = "bindingConditions are required to use bindingFailureConditions"
        errors.append(invalid(f"{path}.bindingConditions", conditions, detail))
    if conditions and not failures:
        detail = "bindingFailureConditions are required to use bindingConditions"
        errors.append(invalid(f"{path}.bindingFailureConditions", failures, detail))
    return errors
