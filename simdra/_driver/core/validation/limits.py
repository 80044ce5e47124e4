"""Size limits of resource.k8s.io/v1 and which device limit a slice gets (pure, api-facts 4.6).

Values as of Kubernetes 1.35. A slice may hold 128 devices, but only 64 when any of them
uses an "advanced" feature: taints, counter consumption or list-valued attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from simdra._driver.core.validation.inputs import as_map, is_map

MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_WITH_ADVANCED_FEATURES = 64  # any device with taints, counters or list attributes
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
MAX_TAINTS_PER_DEVICE = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS_PER_SET = 32
MAX_CONSUMES_COUNTERS = 2
# Compatibility groups per consumption entry (DeviceCompatibilityGroupsMaxSize, 1.37).
MAX_COMPATIBILITY_GROUPS = 2
MAX_BINDING_CONDITIONS = 4
MAX_VALID_VALUES = 10
MAX_ATTRIBUTE_VALUE_LENGTH = 64
MAX_DRIVER_NAME_LENGTH = 63
MAX_POOL_NAME_LENGTH = 253
MAX_C_IDENTIFIER_LENGTH = 32

LIST_VALUE_KEYS = ("ints", "bools", "strings", "versions")
_LIST_VALUE_KEY_SET = frozenset(LIST_VALUE_KEYS)


def uses_advanced_features(device: Mapping[str, Any]) -> bool:
    """True when the device lowers its slice's limit to 64 devices (taints, counters, lists)."""
    if _non_empty_list(device.get("taints")) or _non_empty_list(device.get("consumesCounters")):
        return True
    attributes = device.get("attributes")
    return is_map(attributes) and any(map(_has_list_value, attributes.values()))


def device_limit(devices: Iterable[Mapping[str, Any]]) -> int:
    """How many devices one slice may hold, given the devices that will go in it."""
    if any(uses_advanced_features(as_map(d)) for d in devices):
        return MAX_DEVICES_WITH_ADVANCED_FEATURES
    return MAX_DEVICES_PER_SLICE


def _non_empty_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0


def _has_list_value(attribute: Any) -> bool:
    # Most attributes hold one scalar: the set test rules them out without a lookup per key.
    if not is_map(attribute) or _LIST_VALUE_KEY_SET.isdisjoint(attribute):
        return False
    return any(attribute.get(key) is not None for key in LIST_VALUE_KEYS)
