"""Reading possibly malformed JSON input without raising (pure).

Slices reach validation as plain dicts that may hold anything; these readers give the
rules a safe view (a list, a map, a quantity or None) so that no rule needs a try block.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, TypeGuard

from simdra._driver.core.quantity import QuantityError, parse_quantity


def quantity_or_none(value: Any) -> Fraction | None:
    """The exact value of a quantity, or None when it does not parse."""
    try:
        if isinstance(value, float):
            value = repr(value)
        return parse_quantity(value)
    except (QuantityError, ValueError, ZeroDivisionError):
        return None


def as_list(value: Any) -> list[Any]:
    """`value` when it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """True for a JSON object (any Mapping)."""
    # Fast path for dicts: an ABC isinstance check on every node costs a third of the time.
    return type(value) is dict or isinstance(value, Mapping)


def as_map(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one."""
    return value if is_map(value) else {}


def is_set(value: Any) -> bool:
    """True for a JSON field that is present (not null); `[]` and `{}` count as present."""
    return value is not None
