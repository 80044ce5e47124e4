"""Rules for device capacity and its consumable-capacity requestPolicy (pure, api-facts 4.8).

A requestPolicy is only allowed on devices with `allowMultipleAllocations: true`; it
holds a default and either a list of validValues or a validRange (min, max, step), all
checked against the capacity value.

As 1.37 with DRAFractionalCapacityRange (beta, on): a range whose default or bounds go
below whole units (a GPU compute share of min 100m, step 50m) is checked in thousandths,
and an amount finer than a thousandth is refused; a whole-number range must lie in
[0, 2^63-1]; validValues are told apart by their decimal as written (1 and 1000m differ).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import ceil_int, quantity_text
from simdra._driver.core.validation.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    required,
    too_many,
)
from simdra._driver.core.validation.inputs import as_map, is_map, quantity_or_none
from simdra._driver.core.validation.limits import MAX_VALID_VALUES


def capacity_errors(entry: Any, multi: bool, path: str) -> list[FieldError]:
    """Errors of one DeviceCapacity; `multi` is the device's allowMultipleAllocations."""
    entry = as_map(entry)
    value = quantity_or_none(entry.get("value"))
    errors = []
    if value is None:
        errors.append(invalid(f"{path}.value", entry.get("value"), "must be a valid quantity"))
    policy = entry.get("requestPolicy")
    if policy is None:
        return errors
    if not multi:
        return [
            *errors,
            forbidden(f"{path}.requestPolicy", "allowMultipleAllocations must be true"),
        ]
    if value is None or not is_map(policy):
        return errors
    return errors + request_policy_errors(value, policy, f"{path}.requestPolicy")


def request_policy_errors(
    capacity: Fraction, policy: Mapping[str, Any], path: str
) -> list[FieldError]:
    """Errors of a CapacityRequestPolicy against its capacity value (api-facts 4.8)."""
    valid_values, valid_range = policy.get("validValues"), policy.get("validRange")
    if valid_values and valid_range is not None:
        return [
            forbidden(
                path,
                "exactly one policy can be specified, cannot specify "
                '"validValues" and "validRange" at the same time',
            )
        ]
    if not valid_values and valid_range is None:
        return []
    kind = "validValues" if valid_values else "validRange"
    if policy.get("default") is None:
        return [required(f"{path}.default", f"required when {kind} is defined")]
    default = quantity_or_none(policy["default"])
    if default is None:
        return [invalid(f"{path}.default", policy["default"], "must be a valid quantity")]
    if valid_values:
        return _valid_values_errors(default, capacity, valid_values, f"{path}.validValues")
    return _valid_range_errors(default, capacity, as_map(valid_range), f"{path}.validRange")


# --- validValues ----------------------------------------------------------------------


def _valid_values_errors(
    default: Fraction, capacity: Fraction, raw: Any, path: str
) -> list[FieldError]:
    if not isinstance(raw, list):
        return [invalid(path, raw, "must be a list")]
    if len(raw) > MAX_VALID_VALUES:
        return [too_many(path, len(raw), MAX_VALID_VALUES)]
    options, errors = _parse_options(raw, path)
    errors += _option_errors(options, capacity, raw, path)
    if default not in options:
        errors.append(
            invalid(path, default, "default value is not valid according to the requestPolicy")
        )
    return errors


def _parse_options(raw: list[Any], path: str) -> tuple[list[Fraction], list[FieldError]]:
    """The options that parse, and errors for those that do not or are out of order."""
    options: list[Fraction] = []
    errors: list[FieldError] = []
    for i, text in enumerate(raw):
        option = quantity_or_none(text)
        if option is None:
            errors.append(invalid(f"{path}[{i}]", text, "must be a valid quantity"))
            continue
        if options and option < options[-1]:
            errors.append(invalid(f"{path}[{i}]", text, "values must be sorted in ascending order"))
        options.append(option)
    return options, errors


def _option_errors(
    options: list[Fraction], capacity: Fraction, raw: list[Any], path: str
) -> list[FieldError]:
    # `i` counts parsed options and also indexes `raw`; the two differ only when an option
    # did not parse, which is already reported.
    errors = []
    seen: set[tuple[Fraction, int]] = set()
    for i, option in enumerate(options):
        if option > capacity:
            errors.append(
                invalid(
                    f"{path}[{i}]",
                    option,
                    f"option is larger than capacity value: {quantity_text(capacity)}",
                )
            )
        # Duplicates are detected on the decimal as written, as the 1.37 API server does.
        key = _written_key(raw[i], option)
        if key in seen:
            errors.append(duplicate(f"{path}[{i}]", raw[i]))
        seen.add(key)
    return errors


_WRITTEN = re.compile(r"^[+-]?[0-9]*\.?([0-9]*)(?:([numkMGTPE]?)|[eE]([+-]?[0-9]+))$")
_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
              "E": 18}


def _written_key(text: Any, value: Fraction) -> tuple[Fraction, int]:
    """The amount and the decimals it is written with ("1000m": 3, "1": 0, "1k": 0)."""
    match = _WRITTEN.match(str(text).strip())
    if match is None:  # a binary suffix: a whole number of bytes
        return value, 0
    exponent = int(match[3]) if match[3] is not None else _EXPONENTS[match[2] or ""]
    return value, max(0, len(match[1]) - exponent)


# --- validRange -----------------------------------------------------------------------


def _valid_range_errors(
    default: Fraction, capacity: Fraction, valid_range: Mapping[str, Any], path: str
) -> list[FieldError]:
    if valid_range.get("min") is None:
        return [required(f"{path}.min", "required when validRange is defined")]
    bounds, errors = _parse_bounds(valid_range, path)
    if errors:
        return errors
    low, high, step = bounds["min"], bounds.get("max"), bounds.get("step")
    errors = _min_errors(default, capacity, low, path)
    if high is not None:
        errors += _max_errors(default, capacity, low, high, path)
    coarse = _milli_errors(_bounds(default, low, high, step), path)
    if coarse:
        return errors + coarse
    if step is not None:
        errors += _step_errors(default, capacity, low, high, step, f"{path}.step")
    return errors


def _parse_bounds(
    valid_range: Mapping[str, Any], path: str
) -> tuple[dict[str, Fraction], list[FieldError]]:
    """min, max and step where set and valid, and errors for those that do not parse."""
    bounds: dict[str, Fraction] = {}
    errors: list[FieldError] = []
    for key in ("min", "max", "step"):
        if valid_range.get(key) is None:
            continue
        parsed = quantity_or_none(valid_range[key])
        if parsed is None:
            errors.append(invalid(f"{path}.{key}", valid_range[key], "must be a valid quantity"))
        else:
            bounds[key] = parsed
    return bounds, errors


def _min_errors(
    default: Fraction, capacity: Fraction, low: Fraction, path: str
) -> list[FieldError]:
    errors = []
    if low > capacity:
        errors.append(
            invalid(
                f"{path}.min", low, f"min is larger than capacity value: {quantity_text(capacity)}"
            )
        )
    # Since 1.37 the API server reports a default outside the range at the default (1.36
    # named the bound it breaks).
    if default < low:
        errors.append(
            invalid(f"{path}.default", default, f"default is less than min: {quantity_text(low)}")
        )
    return errors


def _max_errors(
    default: Fraction, capacity: Fraction, low: Fraction, high: Fraction, path: str
) -> list[FieldError]:
    errors = []
    if low > high:
        errors.append(invalid(f"{path}.max", low, f"min is larger than max: {quantity_text(high)}"))
    if high > capacity:
        errors.append(
            invalid(
                f"{path}.max", high, f"max is larger than capacity value: {quantity_text(capacity)}"
            )
        )
    if default > high:
        errors.append(
            invalid(
                f"{path}.default", default, f"default is more than max: {quantity_text(high)}"
            )
        )
    return errors


def _step_errors(
    default: Fraction,
    capacity: Fraction,
    low: Fraction,
    high: Fraction | None,
    step: Fraction,
    path: str,
) -> list[FieldError]:
    bounds = _bounds(default, low, high, step)
    milli = any(v.denominator != 1 for v in bounds.values())
    base = path.rsplit(".", 1)[0]
    if step <= 0:
        return [invalid(path, step, "must be greater than zero")]
    errors = []
    if low + step > capacity:
        errors.append(invalid(path, step, f"one step {quantity_text(low + step)} is larger "
                                          f"than capacity value: {quantity_text(capacity)}"))
    if not milli and any(v < 0 or v > _MAX_INT64 for v in bounds.values()):
        return errors + [invalid(f"{base}.{name}", v, "must be within 0 and 2^63-1")
                         for name, v in bounds.items() if v < 0 or v > _MAX_INT64]
    # Whole numbers as the server's Quantity.Value() (rounded up), or thousandths.
    unit = 1000 if milli else 1
    start, size = ceil_int(low * unit), ceil_int(step * unit)
    for value in (default, high):
        if value is not None and (ceil_int(value * unit) - start) % size != 0:
            errors.append(invalid(path, value, f"value is not a multiple of a given step "
                                               f"({quantity_text(step)}) from "
                                               f"({quantity_text(low)})"))
    return errors


_MAX_INT64 = 2**63 - 1


def _bounds(default: Fraction, low: Fraction, high: Fraction | None,
            step: Fraction | None) -> dict[str, Fraction]:
    named = {"default": default, "min": low, "max": high, "step": step}
    return {name: v for name, v in named.items() if v is not None}


def _milli_errors(bounds: Mapping[str, Fraction], path: str) -> list[FieldError]:
    """Where the range goes below whole units, amounts finer than a thousandth."""
    if all(v.denominator == 1 for v in bounds.values()):
        return []
    return [invalid(f"{path}.{name}", v, "value cannot be represented as a milli value")
            for name, v in bounds.items() if (v * 1000).denominator != 1]
