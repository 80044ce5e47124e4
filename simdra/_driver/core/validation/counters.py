"""Rules for shared counters (pure, api-facts 4.6): a slice's `sharedCounters` counter sets and
a device's `consumesCounters`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.errors import (
    FieldError,
    duplicate_errors,
    invalid,
    required,
    too_many,
)
from simdra._driver.core.validation.inputs import as_map, is_map, quantity_or_none
from simdra._driver.core.validation.limits import (
    MAX_COMPATIBILITY_GROUPS,
    MAX_CONSUMES_COUNTERS,
    MAX_COUNTER_SETS,
    MAX_COUNTERS_PER_SET,
)
from simdra._driver.core.validation.names import dns_label_errors


def counter_sets_errors(counter_sets: Any, path: str) -> list[FieldError]:
    """Errors of `spec.sharedCounters`: at most 8 uniquely named counter sets."""
    if counter_sets is None:
        return []
    if not isinstance(counter_sets, list):
        return [invalid(path, type(counter_sets).__name__, "must be a list")]
    if len(counter_sets) > MAX_COUNTER_SETS:
        return [too_many(path, len(counter_sets), MAX_COUNTER_SETS)]
    errors: list[FieldError] = []
    for i, counter_set in enumerate(counter_sets):
        errors += validate_counter_set(as_map(counter_set), f"{path}[{i}]")
    errors += duplicate_errors(counter_sets, lambda s: as_map(s).get("name"), path)
    return errors


def validate_counter_set(counter_set: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of one CounterSet of `spec.sharedCounters` (name, 1..32 counters)."""
    errors = dns_label_errors(counter_set.get("name"), f"{path}.name")
    return errors + counters_errors(counter_set.get("counters"), f"{path}.counters")


def consumption_errors(consumption: Any, path: str) -> list[FieldError]:
    """Errors of a device's `consumesCounters`: at most 2 entries, one per counter set."""
    if consumption is None:
        return []
    if not isinstance(consumption, list):
        return [invalid(path, type(consumption).__name__, "must be a list")]
    if len(consumption) > MAX_CONSUMES_COUNTERS:
        return [too_many(path, len(consumption), MAX_CONSUMES_COUNTERS)]
    errors: list[FieldError] = []
    for i, entry in enumerate(consumption):
        entry = as_map(entry)
        errors += dns_label_errors(entry.get("counterSet"), f"{path}[{i}].counterSet")
        errors += counters_errors(entry.get("counters"), f"{path}[{i}].counters")
        errors += compatibility_groups_errors(entry.get("compatibilityGroups"),
                                              f"{path}[{i}].compatibilityGroups")
    errors += duplicate_errors(consumption, lambda e: as_map(e).get("counterSet"), path)
    return errors


def compatibility_groups_errors(groups: Any, path: str) -> list[FieldError]:
    """Errors of a consumption's `compatibilityGroups` (KEP-5963, gate
    DRADeviceCompatibilityGroups, 1.37): at most 2 unique DNS-label names."""
    if groups is None:
        return []
    if not isinstance(groups, list):
        return [invalid(path, type(groups).__name__, "must be a list")]
    if len(groups) > MAX_COMPATIBILITY_GROUPS:
        return [too_many(path, len(groups), MAX_COMPATIBILITY_GROUPS)]
    errors: list[FieldError] = []
    for i, group in enumerate(groups):
        errors += dns_label_errors(group, f"{path}[{i}]")
    return errors + duplicate_errors(groups, lambda g: g, path)


def counters_errors(counters: Any, path: str) -> list[FieldError]:
    """Errors of a counter map: 1..32 counters named as DNS labels, each a valid quantity."""
    if not is_map(counters) or not counters:
        return [required(path)]
    if len(counters) > MAX_COUNTERS_PER_SET:
        return [too_many(path, len(counters), MAX_COUNTERS_PER_SET)]
    errors = []
    for name, counter in counters.items():
        errors += dns_label_errors(name, path)
        value = as_map(counter).get("value")
        if quantity_or_none(value) is None:
            errors.append(invalid(f"{path}[{name}].value", value, "must be a valid quantity"))
    return errors
