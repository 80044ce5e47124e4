"""A ResourceSlice as kube-apiserver 1.36 validates it on create and update (after the
schema check, so every field has the right JSON type).

The spec names a driver and a pool, chooses its nodes (`nodes`), and carries either
devices (`devices`) or shared counter sets, never both. An update may not change the
driver, the pool's name or the node name.

Before 1.35 (`release` "1.34") a slice may carry both, and must: every counter set a
device consumes, and every counter it names, must be one of the slice's own.
"""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.devices import (
    LISTS,
    counter_map_errors,
    device_errors,
)
from simdra._driver.testing.apiserver.validation.field import FieldError, invalid, required
from simdra._driver.testing.apiserver.validation.nodes import slice_nodes_errors
from simdra._driver.testing.apiserver.validation.release import minor_of
from simdra._driver.testing.apiserver.validation.sizes import (
    MAX_DEVICES_WITH_ADVANCED_FEATURES,
    each_unique_item,
)
from simdra._driver.testing.apiserver.validation.slice_options import (
    partition_type_errors,
    skip_operations_errors,
)

JSON = dict[str, Any]
_NOT_LOCAL_SET = "must reference a counterSet defined in the ResourceSlice sharedCounters"
_NOT_LOCAL_COUNTER = "must reference a counter defined in the ResourceSlice sharedCounters"
# The fields a slice keeps for life, as (field path, keys from the spec down).
_IMMUTABLE = (
    ("spec.pool.name", ("pool", "name")),
    ("spec.driver", ("driver",)),
    ("spec.nodeName", ("nodeName",)),
)


def slice_errors(obj: JSON, current: JSON | None = None, release: str = "1.37"
                 ) -> list[FieldError]:
    """Every semantic error of ResourceSlice `obj` as the `release` ("1.34") API server
    finds them; `current` is the stored one on update."""
    spec = obj.get("spec")
    errors = formats.object_name(obj.get("metadata"))
    if not isinstance(spec, dict):
        return [*errors, required("spec")]
    errors += formats.driver_name(spec.get("driver", ""), "spec.driver")
    errors += _pool_errors(spec.get("pool"), "spec.pool")
    if current is not None:
        errors += _changed_errors(spec, current.get("spec") or {})
    errors += slice_nodes_errors(spec, "spec")
    if minor_of(release) < 35:
        errors += _local_counter_errors(spec)
    elif spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errors.append(invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    errors += _devices_errors(spec, None if current is None else _map(current.get("spec")))
    errors += each_unique_item(
        spec.get("sharedCounters"),
        "spec.sharedCounters",
        lambda counter_set, where: counter_map_errors(_map(counter_set), "name", where),
        lambda counter_set: str(_map(counter_set).get("name", "")),
    )
    errors += partition_type_errors(spec)
    return errors + skip_operations_errors(spec.get("skipNodeOperations"),
                                           "spec.skipNodeOperations")


def _map(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _local_counter_errors(spec: JSON) -> list[FieldError]:
    """1.34: what the devices consume must be counter sets and counters of this slice."""
    local = {str(_map(s).get("name", "")): _map(_map(s).get("counters"))
             for s in spec.get("sharedCounters") or []}
    errors = []
    for i, device in enumerate(spec.get("devices") or []):
        for j, uses in enumerate(_map(device).get("consumesCounters") or []):
            uses = _map(uses)
            where = f"spec.devices[{i}].consumesCounters[{j}]"
            counter_set = uses.get("counterSet", "")
            if counter_set not in local:
                errors.append(invalid(f"{where}.counterSet", counter_set, _NOT_LOCAL_SET))
                continue
            errors += [invalid(f"{where}.counters", name, _NOT_LOCAL_COUNTER)
                       for name in _map(uses.get("counters")) if name not in local[counter_set]]
    return errors


def _pool_errors(pool: Any, path: str) -> list[FieldError]:
    pool = _map(pool)
    errors = formats.pool_name(pool.get("name", ""), f"{path}.name")
    count = pool.get("resourceSliceCount", 0)
    if count <= 0:
        errors.append(invalid(f"{path}.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation", 0)
    if generation < 0:
        detail = "must be greater than or equal to zero"
        errors.append(invalid(f"{path}.generation", generation, detail))
    return errors


def _changed_errors(spec: JSON, before: JSON) -> list[FieldError]:
    return [
        invalid(path, _read(spec, keys), "field is immutable")
        for path, keys in _IMMUTABLE
        if _read(spec, keys) != _read(before, keys)
    ]


def _read(spec: JSON, keys: tuple[str, ...]) -> Any:
    value: Any = spec
    for key in keys:
        value = _map(value).get(key)
    return value


def _devices_errors(spec: JSON, before: JSON | None) -> list[FieldError]:
    devices = spec.get("devices")
    per_device_nodes = spec.get("perDeviceNodeSelection") is True
    limit = MAX_DEVICES_WITH_ADVANCED_FEATURES if _advanced(devices) else None
    stored = {_name(d): _map(d) for d in (before or {}).get("devices") or []}
    return each_unique_item(
        devices,
        "spec.devices",
        lambda device, where: device_errors(
            device, where, per_device_nodes, stored.get(_name(device))
        ),
        _name,
        limit,
    )


def _name(device: Any) -> str:
    return str(_map(device).get("name", ""))


def _advanced(devices: Any) -> bool:
    """True when any device has taints, consumes counters or has a list-valued attribute:
    such a slice may hold only 64 devices."""
    for device in devices if isinstance(devices, list) else []:
        device = _map(device)
        if device.get("taints") or device.get("consumesCounters"):
            return True
        for attribute in _map(device.get("attributes")).values():
            if any(_map(attribute).get(k) is not None for k in LISTS):
                return True
    return False
