"""A device capacity's `requestPolicy` (consumable capacity), as kube-apiserver 1.37 checks it.

Only a device with `allowMultipleAllocations: true` may carry one. It holds a `default` and
either `validValues` (ascending, within the capacity, at most 10) or a `validRange`
(`min`, optional `max` and `step`). Errors about a default outside the range land on
`validRange.default`, as a 1.37 server reports them (1.36 named the bound).

DRAFractionalCapacityRange (beta in 1.37, on): where the default or a bound is below
whole units (100m) the step arithmetic works on thousandths (`MilliValue()`), and an
amount finer than a thousandth is refused; otherwise it works on whole numbers
(`Quantity.Value()`), which must lie in [0, MaxInt64]. validValues are told apart by
their decimal as written ("1" and "1000m" differ).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from simdra._driver.testing.apiserver.validation.amounts import (
    amount,
    decimal_key,
    is_fractional,
    milli_exact,
    text,
    whole,
)
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    forbidden,
    invalid,
    required,
)
from simdra._driver.testing.apiserver.validation.sizes import each_unique_item, limit_of

_BOTH = (
    'exactly one policy can be specified, cannot specify "validValues" and "validRange" at '
    "the same time"
)


def capacity_errors(capacity: Any, shared: bool, path: str) -> list[FieldError]:
    """A DeviceCapacity at `path`; `shared` is the device's allowMultipleAllocations."""
    capacity = capacity if isinstance(capacity, dict) else {}
    policy = capacity.get("requestPolicy")
    if policy is None:
        return []
    if not shared:
        return [forbidden(f"{path}.requestPolicy", "allowMultipleAllocations must be true")]
    top = amount(capacity.get("value"))
    if top is None or not isinstance(policy, dict):
        return []  # an unparsable quantity never gets here: the decoder refuses it (400)
    return _policy_errors(policy, top, f"{path}.requestPolicy")


def _policy_errors(policy: dict[str, Any], top: Fraction, path: str) -> list[FieldError]:
    values, valid_range = policy.get("validValues") or [], policy.get("validRange")
    if values and valid_range is not None:
        return [forbidden(path, _BOTH)]
    if not values and valid_range is None:
        return []
    kind = "validValues" if values else "validRange"
    default = amount(policy.get("default"))
    if default is None:
        return [required(f"{path}.default", f"required when {kind} is defined")]
    if values:
        return _values_errors(values, default, top, f"{path}.validValues")
    return _range_errors(valid_range, default, top, f"{path}.validRange")


def _values_errors(
    values: list[Any], default: Fraction, top: Fraction, path: str
) -> list[FieldError]:
    options = [amount(v) for v in values]
    errors = [
        invalid(f"{path}[{i + 1}]", values[i + 1], "values must be sorted in ascending order")
        for i in range(len(options) - 1)
        if _gt(options[i], options[i + 1])
    ]

    def option_errors(option: Any, where: str) -> list[FieldError]:
        parsed = amount(option)
        if parsed is not None and parsed > top:
            detail = f"option is larger than capacity value: {text(top)}"
            return [invalid(where, option, detail)]
        return []

    errors += each_unique_item(values, path, option_errors, _option_key)
    # Over the limit the server looks at no option, so it does not find the default either.
    if default not in options or len(values) > (limit_of(path) or len(values)):
        errors.append(
            invalid(
                path, text(default), "default value is not valid according to the requestPolicy"
            )
        )
    return errors


def _gt(a: Fraction | None, b: Fraction | None) -> bool:
    return a is not None and b is not None and a > b


def _option_key(option: Any) -> str:
    # With DRAFractionalCapacityRange the server tells options apart by their decimal as
    # written (AsDec): 1500m and 2 differ, so do 1 and 1000m; 1k and 1000 do not.
    return decimal_key(option)


def _range_errors(
    valid_range: Any, default: Fraction, top: Fraction, path: str
) -> list[FieldError]:
    valid_range = valid_range if isinstance(valid_range, dict) else {}
    low = amount(valid_range.get("min"))
    if low is None:
        return [required(f"{path}.min", "required when validRange is defined")]
    errors = []
    if low > top:
        errors.append(
            invalid(f"{path}.min", text(low), f"min is larger than capacity value: {text(top)}")
        )
    if default < low:
        errors.append(
            invalid(f"{path}.default", text(default), f"default is less than min: {text(low)}")
        )
    high = amount(valid_range.get("max"))
    if high is not None:
        errors += _max_errors(low, high, top, f"{path}.max")
        if default > high:
            detail = f"default is more than max: {text(high)}"
            errors.append(invalid(f"{path}.default", text(default), detail))
    step = amount(valid_range.get("step"))
    bounds = {"default": default, "min": low, "max": high, "step": step}
    milli = any(v is not None and is_fractional(v) for v in bounds.values())
    if milli:
        coarse = [invalid(f"{path}.{name}", text(v), "value cannot be represented as a milli value")
                  for name, v in bounds.items() if v is not None and not milli_exact(v)]
        if coarse:
            return errors + coarse
    if step is not None:
        errors += _step_errors(bounds, top, path, milli)
    return errors


def _max_errors(low: Fraction, high: Fraction, top: Fraction, path: str) -> list[FieldError]:
    checks = (
        (low > high, low, f"min is larger than max: {text(high)}"),
        (high > top, high, f"max is larger than capacity value: {text(top)}"),
    )
    return [invalid(path, text(shown), detail) for broken, shown, detail in checks if broken]


def _step_errors(
    bounds: dict[str, Fraction | None], top: Fraction, path: str, milli: bool
) -> list[FieldError]:
    low, step = bounds["min"], bounds["step"]
    assert low is not None and step is not None
    if step <= 0:
        return [invalid(f"{path}.step", text(step), "must be greater than zero")]
    errors = []
    if low + step > top:
        detail = f"one step {text(low + step)} is larger than capacity value: {text(top)}"
        errors.append(invalid(f"{path}.step", text(step), detail))
    if not milli:
        # Value() only holds in [0, MaxInt64]; the server refuses what lies outside
        # before its integer arithmetic.
        unsafe = [_int64_error(f"{path}.{name}", v) for name, v in bounds.items()
                  if v is not None and (v < 0 or whole(v) > _MAX_INT64)]
        if unsafe:
            return errors + unsafe
    unit = 1000 if milli else 1
    start, size = whole(low * unit), whole(step * unit)
    for value in (bounds["default"], bounds["max"]):
        if value is not None and (whole(value * unit) - start) % size != 0:
            detail = f"value is not a multiple of a given step ({text(step)}) from ({text(low)})"
            errors.append(invalid(f"{path}.step", text(value), detail))
    return errors


_MAX_INT64 = 2**63 - 1


def _int64_error(path: str, value: Fraction) -> FieldError:
    if value < 0:
        return invalid(path, text(value), "must be greater than or equal to 0")
    return invalid(path, text(value), f"must not be larger than {_MAX_INT64}")
