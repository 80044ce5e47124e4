"""Validation of one `spec.devices[]` entry (pure): its name, sizes, attributes, capacity,
taints, counter consumption, node selection, binding conditions and node-allocatable
resource mappings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.attributes import attribute_errors, attribute_value_count
from simdra._driver.core.validation.binding_conditions import binding_condition_errors
from simdra._driver.core.validation.capacity import capacity_errors
from simdra._driver.core.validation.counters import consumption_errors
from simdra._driver.core.validation.errors import FieldError, invalid
from simdra._driver.core.validation.inputs import as_map, is_map
from simdra._driver.core.validation.limits import (
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES_AND_CAPACITIES,
)
from simdra._driver.core.validation.names import dns_label_errors, qualified_name_errors
from simdra._driver.core.validation.node_allocatable import node_allocatable_errors
from simdra._driver.core.validation.node_selection import device_node_selection_errors
from simdra._driver.core.validation.taints import taints_errors


def validate_device(
    device: Mapping[str, Any], path: str, per_device_node_selection: bool = False
) -> list[FieldError]:
    """All errors of one `spec.devices[]` entry; `path` is its field path, e.g. `spec.devices[3]`.

    `per_device_node_selection` is the slice's `spec.perDeviceNodeSelection`: when true the
    device must pick exactly one of nodeName/nodeSelector/allNodes, otherwise none.

    Example (in a driver's test)::

        assert validate_device(device.spec, "spec.devices[0]") == []
        validate_device({"name": "Crypto_0"}, "spec.devices[0]")
        # [FieldError(field="spec.devices[0].name", message='Invalid value: "Crypto_0": ...')]
    """
    if not is_map(device):
        return [invalid(path, type(device).__name__, "must be a JSON object")]
    attributes, capacity = as_map(device.get("attributes")), as_map(device.get("capacity"))
    multi = device.get("allowMultipleAllocations") is True
    errors = dns_label_errors(device.get("name"), f"{path}.name")
    errors += _size_errors(attributes, capacity, path)
    errors += _attributes_errors(attributes, f"{path}.attributes")
    errors += _capacities_errors(capacity, multi, f"{path}.capacity")
    errors += taints_errors(device.get("taints"), f"{path}.taints")
    errors += consumption_errors(device.get("consumesCounters"), f"{path}.consumesCounters")
    errors += device_node_selection_errors(device, per_device_node_selection, path)
    errors += binding_condition_errors(device, path)
    errors += node_allocatable_errors(device, path)
    return errors


def _size_errors(
    attributes: Mapping[str, Any], capacity: Mapping[str, Any], path: str
) -> list[FieldError]:
    errors = []
    names = len(attributes) + len(capacity)
    if names > MAX_ATTRIBUTES_AND_CAPACITIES:
        errors.append(
            invalid(
                path,
                names,
                "the total number of attributes and capacities must not exceed "
                f"{MAX_ATTRIBUTES_AND_CAPACITIES}",
            )
        )
    values = attribute_value_count(attributes)
    if values > MAX_ATTRIBUTE_VALUES:
        errors.append(
            invalid(
                path,
                values,
                f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}",
            )
        )
    return errors


def _attributes_errors(attributes: Mapping[str, Any], path: str) -> list[FieldError]:
    # Name errors go on the map's path, as the API server reports them.
    errors: list[FieldError] = []
    for name, attribute in attributes.items():
        errors += qualified_name_errors(name, path)
        errors += attribute_errors(attribute, f"{path}[{name}]")
    return errors


def _capacities_errors(capacity: Mapping[str, Any], multi: bool, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for name, entry in capacity.items():
        errors += qualified_name_errors(name, path)
        errors += capacity_errors(entry, multi, f"{path}[{name}]")
    return errors
