"""Rules for a device's bindingConditions and bindingFailureConditions (pure): at most 4
label-style names each, no overlap, and neither list without the other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simdra._driver.core.validation.errors import FieldError, duplicate_errors, invalid, too_many
from simdra._driver.core.validation.inputs import as_list
from simdra._driver.core.validation.limits import MAX_BINDING_CONDITIONS
from simdra._driver.core.validation.names import label_name_errors


def binding_condition_errors(device: Mapping[str, Any], path: str) -> list[FieldError]:
    """Errors of the device's binding conditions, each list alone and the two together."""
    conditions = as_list(device.get("bindingConditions"))
    failures = as_list(device.get("bindingFailureConditions"))
    errors = _condition_list_errors(conditions, f"{path}.bindingConditions")
    errors += _condition_list_errors(failures, f"{path}.bindingFailureConditions")
    return errors + _pairing_errors(conditions, failures, path)


def _condition_list_errors(items: list[Any], path: str) -> list[FieldError]:
    if len(items) > MAX_BINDING_CONDITIONS:
        return [too_many(path, len(items), MAX_BINDING_CONDITIONS)]
    errors: list[FieldError] = []
    for i, item in enumerate(items):
        errors += label_name_errors(item, f"{path}[{i}]")
    return errors + duplicate_errors(items, lambda c: c, path)


def _pairing_errors(conditions: list[Any], failures: list[Any], path: str) -> list[FieldError]:
    errors = [
        invalid(
            f"{path}.bindingFailureConditions[{i}]",
            item,
            "bindingFailureConditions must not overlap with bindingConditions",
        )
        for i, item in enumerate(failures)
        if item in conditions
    ]
    if failures and not conditions:
        errors.append(
            invalid(
                f"{path}.bindingConditions",
                conditions,
                "bindingConditions are required to use bindingFailureConditions",
            )
        )
    if conditions and not failures:
        errors.append(
            invalid(
                f"{path}.bindingFailureConditions",
                failures,
                "bindingFailureConditions are required to use bindingConditions",
            )
        )
    return errors
