"""Local validation of a pool before anything is written (pure).

Two layers:
- pool-wide rules no single slice can check (api-facts 6.3 "local validation"): device names
  unique in the pool, counter-set names unique in the pool, every `consumesCounters`
  entry naming a counter set of the pool and only counters that set defines, and no
  attribute or capacity name qualified with the driver's own domain (the Go helper's
  `ValidateQualifiedNames`, on by default from v0.38);
- every slice the pool will be published as, checked with the API server's own rules
  (`validation.validate_slice`: names, limits, requestPolicy, taints, ...).

A pool with any problem is not published; each problem names the pool, the device when
there is one, the field and the rule, so one log line explains it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simdra._driver.core.validation import FieldError, validate_slice
from simdra._driver.slices.desired import DesiredPool, DesiredSlice
from simdra._driver.slices.semantic import normalize

_DEVICE_PATH = re.compile(r"^spec\.devices\[(\d+)\]")
_DUPLICATE_DEVICE = re.compile(r"^spec\.devices\[\d+\]$")


@dataclass(frozen=True)
class PoolProblem:
    """Why a pool cannot be published: pool, device (if any), field path and rule."""

    pool: str
    device: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f'pool "{self.pool}"'
        if self.device is not None:
            where += f', device "{self.device}"'
        return f"{where}: {self.field}: {self.message}"


def check_pool(
    desired: DesiredPool, slice_objects: Iterable[Mapping[str, Any]]
) -> list[PoolProblem]:
    """All problems of a pool: pool-wide rules, then each slice as the API server sees it.

    `slice_objects` are the complete ResourceSlice objects (one per desired slice, same
    order) the pool would be published as.
    """
    objects = list(slice_objects)
    driver = next((str(o.get("spec", {}).get("driver", "")) for o in objects), "")
    return pool_problems(desired, [validate_slice(obj) for obj in objects], driver)


def pool_problems(
    desired: DesiredPool, slice_errors: Sequence[Sequence[FieldError]], driver: str = ""
) -> list[PoolProblem]:
    """Pool-wide rule problems plus the given `validate_slice` errors of each slice.

    Lets a caller reuse the (costly) errors of slices that did not change.
    """
    problems = pool_rule_problems(desired, driver)
    for index, errors in enumerate(slice_errors):
        devices = desired.slices[index].devices
        for error in errors:
            if _DUPLICATE_DEVICE.match(error.field) and error.message.startswith("Duplicate"):
                continue  # already reported pool-wide, once per device
            problems.append(_from_field_error(desired.name, devices, error.field, error.message))
    return problems


def pool_rule_problems(desired: DesiredPool, driver: str = "") -> list[PoolProblem]:
    """Problems only visible across the slices of a pool (and, given the driver, names
    that repeat its domain)."""
    problems: list[PoolProblem] = []
    counter_sets: dict[str, set[str]] = {}
    for counter_set in (c for s in desired.slices for c in s.shared_counters):
        name = str(counter_set.get("name"))
        if name in counter_sets:
            problems.append(
                PoolProblem(desired.name, None, f"sharedCounters[{name}]",
                            "Duplicate value: counter set names must be unique in the pool")
            )
        counter_sets[name] = set((counter_set.get("counters") or {}).keys())
    seen: set[str] = set()
    for device in (d for s in desired.slices for d in s.devices):
        name = str(device.get("name"))
        if name in seen:
            problems.append(
                PoolProblem(desired.name, name, "name",
                            "Duplicate value: device names must be unique in the pool")
            )
        seen.add(name)
        problems += _consumption_problems(desired.name, name, device, counter_sets)
        problems += own_domain_problems(desired.name, name, device, driver)
    for index, desired_slice in enumerate(desired.slices):
        if desired_slice.devices and desired_slice.shared_counters:
            problems += _pair_limit_problems(desired.name, index, desired_slice)
    return problems + _partition_cost_problems(desired)


def own_domain_problems(
    pool: str, device_name: str, device: Mapping[str, Any], driver: str
) -> list[PoolProblem]:
    """Attribute and capacity names qualified with the driver's own domain
    (`<driver>/foo`): the same name as `foo` in the driver's slices, so publishing it is
    redundant at best, and with both forms CEL sees either value at random. The Go
    helper refuses such a pool from v0.38 (resourceslice `validateUnqualifiedName`)."""
    if not driver:
        return []
    problems = []
    for field in ("attributes", "capacity"):
        for name in device.get(field) or {}:
            domain, _, bare = str(name).partition("/")
            if bare and domain == driver:
                problems.append(PoolProblem(
                    pool, device_name, f"{field}[{name}]",
                    f'use the unqualified name "{bare}": the driver\'s domain is implied'))
    return problems


def _partition_cost_problems(desired: DesiredPool) -> list[PoolProblem]:
    """Devices of one partition type (the value of the slices' partitionTypeAttribute)
    must consume the same counters, in amounts (the counter set may differ: each
    physical device has its own), as the field's contract says: the API server does
    not check it, so a consumer summing up partition types would be misled."""
    first: dict[tuple[str, Any], tuple[str, Any]] = {}  # (attr, type) -> (device, cost)
    problems = []
    for desired_slice in desired.slices:
        name = desired_slice.partition_type_attribute
        if name is None:
            continue
        for device in desired_slice.devices:
            if not device.get("consumesCounters"):
                continue
            bare = name.rpartition("/")[2]
            attributes = device.get("attributes") or {}
            value = (attributes.get(name) or attributes.get(bare) or {}).get("string")
            cost = sorted(repr(normalize(c.get("counters"))) for c in device["consumesCounters"])
            seen = first.setdefault((name, value), (str(device.get("name")), cost))
            if seen[1] != cost:
                problems.append(PoolProblem(
                    desired.name, str(device.get("name")), f"attributes[{name}]",
                    f"partition type {value!r} is also that of device {seen[0]}, which "
                    "consumes other counters; devices of one type must consume the same"))
    return problems


# The 1.34 API's limits on a slice that carries counter sets next to their devices.
MAX_PAIRED_SHARED_COUNTERS = 32
MAX_PAIRED_DEVICE_COUNTERS = 1024


def _pair_limit_problems(pool: str, index: int, paired: DesiredSlice) -> list[PoolProblem]:
    """The 1.34 limits on a slice that holds counter sets and the devices consuming them:
    at most 32 counters over all its sets, at most 1,024 consumed over all its devices."""
    shared = sum(len(c.get("counters") or {}) for c in paired.shared_counters)
    consumed = sum(len(entry.get("counters") or {}) for d in paired.devices
                   for entry in d.get("consumesCounters") or ())
    limits = (("sharedCounters", shared, MAX_PAIRED_SHARED_COUNTERS, "shared counters"),
              ("devices", consumed, MAX_PAIRED_DEVICE_COUNTERS, "counters consumed by devices"))
    return [
        PoolProblem(pool, None, f"slice[{index}].{field}",
                    f"Invalid value: {count}: the total number of {what} in a slice that "
                    f"holds counter sets with their devices (the 1.34 layout) must not "
                    f"exceed {limit}")
        for field, count, limit, what in limits if count > limit
    ]


def _consumption_problems(
    pool: str, device: str, spec: Mapping[str, Any], counter_sets: Mapping[str, set[str]]
) -> list[PoolProblem]:
    problems = []
    for i, entry in enumerate(spec.get("consumesCounters") or []):
        set_name = entry.get("counterSet")
        path = f"consumesCounters[{i}]"
        if set_name not in counter_sets:
            problems.append(
                PoolProblem(pool, device, f"{path}.counterSet",
                            f"Invalid value: {set_name!r}: no counter set of this name "
                            "in the pool's sharedCounters")
            )
            continue
        for counter in (entry.get("counters") or {}):
            if counter not in counter_sets[set_name]:
                problems.append(
                    PoolProblem(pool, device, f"{path}.counters[{counter}]",
                                f"Invalid value: counter set {set_name!r} has no counter "
                                f"{counter!r}")
                )
    return problems


def _from_field_error(
    pool: str, devices: tuple[Mapping[str, Any], ...], field: str, message: str
) -> PoolProblem:
    """Attach the device name to a slice-level error about `spec.devices[i]...`."""
    match = _DEVICE_PATH.match(field)
    if match and int(match[1]) < len(devices):
        device = devices[int(match[1])]
        name = device.get("name") if isinstance(device, Mapping) else None
        return PoolProblem(pool, str(name), field, message)
    return PoolProblem(pool, None, field, message)
