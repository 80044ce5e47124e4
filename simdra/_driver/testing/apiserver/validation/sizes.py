"""The size limits of a ResourceSlice, as one table keyed by field, and the three ways the
API server walks a list or a map under a limit (also used for claims, whose limits the
caller passes).

The table is written from the constants of `k8s.io/api/resource` (1.36): where a field is
not in it, its size is not limited by semantic validation. Paths are written with `*` for
any index or key, so `MAX_ENTRIES["spec.devices[*].taints"]` is the limit of every device's
taints. The server checks a size before anything else and, when it is over, reports only
`Too many` for the field: validating thousands of items of an oversized list is work it
refuses to do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from simdra._driver.testing.apiserver.validation.field import FieldError, duplicate, too_many

# Field (indices and keys as `*`) -> the most entries the server accepts.
MAX_ENTRIES: dict[str, int] = {
    "spec.devices": 128,  # ResourceSliceMaxDevices
    "spec.sharedCounters": 8,  # ResourceSliceMaxCounterSets
    "spec.sharedCounters[*].counters": 32,  # ResourceSliceMaxCountersPerCounterSet
    "spec.devices[*].taints": 16,  # DeviceTaintsMaxLength
    "spec.devices[*].consumesCounters": 2,  # ...MaxDeviceCounterConsumptionsPerDevice
    "spec.devices[*].consumesCounters[*].counters": 32,  # ...PerDeviceCounterConsumption
    "spec.devices[*].bindingConditions": 4,  # BindingConditionsMaxSize
    "spec.devices[*].bindingFailureConditions": 4,  # BindingFailureConditionsMaxSize
    "spec.devices[*].capacity[*].requestPolicy.validValues": 10,  # ...DiscreteMaxOptions
}
# A slice whose devices use taints, counters or list attributes holds fewer of them.
MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
# Per device, counted across fields: attributes and capacities together, attribute values.
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_VALUES = 48
# Strings, in bytes.
MAX_ATTRIBUTE_VALUE_BYTES = 64
# Map keys longer than this are shortened in the middle in a value's path.
MAX_SHOWN_KEY = {"attributes": 96, "capacity": 96, "counters": 63}

_INDEX = re.compile(r"\[[^\]]*\]")

Check = Callable[[Any, str], list[FieldError]]


def limit_of(path: str) -> int | None:
    """The size limit of the field at `path`, None when it has none."""
    return MAX_ENTRIES.get(_INDEX.sub("[*]", path))


def over_limit(size: int, path: str, limit: int | None = None) -> list[FieldError]:
    """`Too many` when `size` is over the field's limit (`limit` overrides the table)."""
    limit = limit_of(path) if limit is None else limit
    return [too_many(path, size, limit)] if limit is not None and size > limit else []


def each_item(items: Any, path: str, check: Check, limit: int | None = None) -> list[FieldError]:
    """Go's `validateSlice`: the size, then every item at `path[i]`."""
    items = items if isinstance(items, list) else []
    errors = over_limit(len(items), path, limit)
    if errors:
        return errors
    for i, item in enumerate(items):
        errors += check(item, f"{path}[{i}]")
    return errors


def each_unique_item(
    items: Any, path: str, check: Check, key: Callable[[Any], Hashable], limit: int | None = None
) -> list[FieldError]:
    """Go's `validateSet`: `each_item`, then `Duplicate value` where a key came before."""
    items = items if isinstance(items, list) else []
    errors = over_limit(len(items), path, limit)
    if errors:
        return errors
    errors = each_item(items, path, check, limit)
    seen: set[Hashable] = set()
    for i, item in enumerate(items):
        value = key(item)
        if value in seen:
            errors.append(duplicate(f"{path}[{i}]", value))
        seen.add(value)
    return errors


def each_entry(
    entries: Any, path: str, check_key: Check, check_value: Check | None = None
) -> list[FieldError]:
    """Go's `validateMap`: the size, then each key (reported on the map's path) and each
    value at `path[key]`, the key shortened as the server shortens it."""
    entries = entries if isinstance(entries, Mapping) else {}
    errors = over_limit(len(entries), path)
    if errors:
        return errors
    shown = MAX_SHOWN_KEY.get(path.rsplit(".", 1)[-1], 16)
    for name, value in entries.items():
        errors += check_key(name, path)
        if check_value is not None:
            errors += check_value(value, f"{path}[{shorten(str(name), shown)}]")
    return errors


def shorten(key: str, most: int) -> str:
    """A map key as it appears in a field path: cut in the middle when over `most` bytes."""
    most = max(most, 16)
    if len(key) <= most:
        return key
    keep = most - 3
    return key[: (keep + 1) // 2] + "..." + key[len(key) - keep // 2 :]
