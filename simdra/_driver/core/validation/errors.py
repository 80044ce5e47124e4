"""FieldError and its constructors, worded like k8s.io/apimachinery `field.Error` (pure).

Field paths and messages follow the API server, e.g.
``spec.devices[3].capacity[bandwidth].requestPolicy.default: Invalid value: "3": ...``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import quantity_text


@dataclass(frozen=True)
class FieldError:
    """One validation failure: where (API field path) and why (API server wording).

    `reason` is the StatusCause reason the API server would send (FieldValueInvalid,
    FieldValueRequired, FieldValueDuplicate, FieldValueTooMany, ...).

    Example (what `validate_device` returns)::

        errors: list[FieldError] = validate_device(spec, "spec.devices[0]")
        print("; ".join(str(e) for e in errors))  # "<field>: <message>", as the server says
    """

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _show(value: Any) -> str:
    if isinstance(value, Fraction):
        return json.dumps(quantity_text(value))
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """An `Invalid value` error."""
    return FieldError(path, f"Invalid value: {_show(value)}: {detail}", "FieldValueInvalid")


def required(path: str, detail: str = "") -> FieldError:
    """A `Required value` error."""
    text = f"Required value: {detail}" if detail else "Required value"
    return FieldError(path, text, "FieldValueRequired")


def duplicate(path: str, value: Any) -> FieldError:
    """A `Duplicate value` error."""
    return FieldError(path, f"Duplicate value: {_show(value)}", "FieldValueDuplicate")


def too_many(path: str, actual: int, limit: int) -> FieldError:
    """A `Too many` error for a list or map over its size limit."""
    return FieldError(
        path, f"Too many: {actual}: must have at most {limit} items", "FieldValueTooMany"
    )


def too_long(path: str, limit: int) -> FieldError:
    """A `Too long` error for a string over its length limit."""
    return FieldError(path, f"Too long: may not be more than {limit} bytes", "FieldValueTooLong")


def not_found(path: str, value: Any) -> FieldError:
    """A `Not found` error: `value` names something that does not exist."""
    return FieldError(path, f"Not found: {_show(value)}", "FieldValueNotFound")


def forbidden(path: str, detail: str) -> FieldError:
    """A `Forbidden` error."""
    return FieldError(path, f"Forbidden: {detail}", "FieldValueForbidden")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    """An `Unsupported value` error naming the allowed values."""
    allowed = ", ".join(json.dumps(s) for s in supported)
    return FieldError(
        path,
        f"Unsupported value: {_show(value)}: supported values: {allowed}",
        "FieldValueNotSupported",
    )


def duplicate_errors(items: list[Any], key: Callable[[Any], Any], path: str) -> list[FieldError]:
    """A `Duplicate value` error at `path[i]` for each item whose key was seen before.

    Unhashable keys (malformed input) are skipped: other rules report them.
    """
    seen: set[Any] = set()
    errors = []
    for i, item in enumerate(items):
        value = key(item)
        try:
            hash(value)
        except TypeError:
            continue
        if value in seen:
            errors.append(duplicate(f"{path}[{i}]", value))
        seen.add(value)
    return errors
