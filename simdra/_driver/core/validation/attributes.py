"""Rules for device attributes (pure): one value each, string and version formats, the
count of values a device may carry."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from simdra._driver.core.validation.errors import FieldError, invalid, too_long
from simdra._driver.core.validation.inputs import as_list, as_map
from simdra._driver.core.validation.limits import LIST_VALUE_KEYS, MAX_ATTRIBUTE_VALUE_LENGTH

_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(rf"^{_NUM}\.{_NUM}\.{_NUM}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?$")
_VALUE_KEYS = ("int", "bool", "string", "version", *LIST_VALUE_KEYS)


def attribute_value_count(attributes: Mapping[str, Any]) -> int:
    """How many values the attributes hold: a list counts its items, a scalar counts 1."""
    count = 0
    for attribute in attributes.values():
        lists = [as_map(attribute).get(k) for k in LIST_VALUE_KEYS]
        items = sum(len(v) for v in lists if isinstance(v, list))
        count += items or 1
    return count


def attribute_errors(attribute: Any, path: str) -> list[FieldError]:
    """Errors of one DeviceAttribute: value formats, and exactly one value set."""
    attribute = as_map(attribute)
    present = [k for k in _VALUE_KEYS if attribute.get(k) is not None]
    errors: list[FieldError] = []
    if isinstance(attribute.get("string"), str):
        errors += _string_value_errors(attribute["string"], f"{path}.string")
    if isinstance(attribute.get("version"), str):
        errors += _version_value_errors(attribute["version"], f"{path}.version")
    for key in LIST_VALUE_KEYS:
        if attribute.get(key) is not None:
            errors += _list_value_errors(key, attribute[key], f"{path}.{key}")
    if len(present) != 1:
        errors.append(
            invalid(path, dict(attribute) if present else "", "exactly one value must be specified")
        )
    return errors


def _list_value_errors(key: str, items: Any, path: str) -> list[FieldError]:
    errors = [] if items else [invalid(path, items, "must not be empty if specified")]
    check = _ITEM_CHECKS.get(key)
    if check is None:
        return errors
    for i, item in enumerate(as_list(items)):
        if isinstance(item, str):
            errors += check(item, f"{path}[{i}]")
    return errors


def _string_value_errors(value: str, path: str) -> list[FieldError]:
    if len(value) > MAX_ATTRIBUTE_VALUE_LENGTH:
        return [too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH)]
    return []


def _version_value_errors(value: str, path: str) -> list[FieldError]:
    errors = []
    if not _SEMVER.match(value):
        errors.append(
            invalid(path, value, "must be a string compatible with semver.org spec 2.0.0")
        )
    if len(value) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH))
    return errors


# Formats checked on each string item of a list value; ints and bools have none.
_ITEM_CHECKS: dict[str, Callable[[str, str], list[FieldError]]] = {
    "strings": _string_value_errors,
    "versions": _version_value_errors,
}
