"""Copies of JSON-shaped data (dicts, lists, tuples of strings, numbers, booleans, None).

`copy.deepcopy` keeps a memo of every object it visits and looks up a copier per type:
on the small documents a prepare copies (device attributes, container edits) that is
most of its cost. The copy here keeps each container's type, shares the immutable
leaves, and hands anything else to `copy.deepcopy`.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")
_LEAVES = (str, int, float, bool, type(None))


def copy_json(value: T) -> T:
    """A deep copy of `value`, as `copy.deepcopy` makes it for JSON-shaped data."""
    return _copy(value)  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind is tuple:
        return tuple(_copy(item) for item in value)
    if kind in _LEAVES:
        return value
    return copy.deepcopy(value)
