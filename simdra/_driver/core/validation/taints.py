"""Rules for device taints (pure): at most 16, label-style keys and values, known effects."""

from __future__ import annotations

from typing import Any

from simdra._driver.core.validation.errors import (
    FieldError,
    invalid,
    not_supported,
    required,
    too_many,
)
from simdra._driver.core.validation.inputs import as_map
from simdra._driver.core.validation.limits import MAX_TAINTS_PER_DEVICE
from simdra._driver.core.validation.names import label_name_errors, label_value_errors

TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")


def taints_errors(taints: Any, path: str) -> list[FieldError]:
    """Errors of a device's `taints` list."""
    if taints is None:
        return []
    if not isinstance(taints, list):
        return [invalid(path, type(taints).__name__, "must be a list")]
    if len(taints) > MAX_TAINTS_PER_DEVICE:
        return [too_many(path, len(taints), MAX_TAINTS_PER_DEVICE)]
    errors: list[FieldError] = []
    for i, taint in enumerate(taints):
        errors += _taint_errors(as_map(taint), f"{path}[{i}]")
    return errors


def _taint_errors(taint: Any, path: str) -> list[FieldError]:
    errors = label_name_errors(taint.get("key"), f"{path}.key")
    if taint.get("value"):
        errors += label_value_errors(taint["value"], f"{path}.value")
    effect = taint.get("effect")
    if not effect:
        errors.append(required(f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        errors.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return errors
