"""Consumable-capacity request policy: how much of a shared device's capacity one share uses.

A device with `allowMultipleAllocations: true` lists capacities such as
`{"value": "10G", "requestPolicy": {"default": "1M", "validRange": {"min": "1M",
"step": "8"}}}`. The scheduler turns a claim's requested amount into the amount that is
actually consumed (rounded up to what the policy allows) and refuses the device when the
policy cannot be met; the sum over all shares must stay within `value`.

Everything here is pure and exact (Fractions from `simdra._driver.core.quantity`). The rules
follow the resource.k8s.io/v1 API comments and the structured allocator:

* no request: the policy's `default`, or the full `value` when there is no default
  (which includes "no requestPolicy at all");
* no requestPolicy: the request as is;
* validRange: below `min` -> `min`; with `step` rounded up to `min + n*step`; without
  `step` used as is; above `max` after rounding -> does not fit;
* validValues: the smallest valid value >= request; above the largest -> does not fit.

Rounding is exact arithmetic on Fractions. For integer min and step this gives the same
result as the API server's integer arithmetic (ceil(ceil(x)/s) == ceil(x/s)); fractional
values behave like the 1.37 milli-unit path (DRAFractionalCapacityRange).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import format_quantity, parse_quantity

QuantityLike = str | int | Fraction


@dataclass(frozen=True)
class NoFit:
    """The request cannot be served by this capacity; `reason` says why, for error messages."""

    reason: str


def consumed_amount(
    capacity: Mapping[str, Any], requested: QuantityLike | None = None
) -> Fraction | NoFit:
    """The amount one share consumes of `capacity` (a device capacity entry), or NoFit.

    `requested` is the claim's `capacity.requests` value for this capacity, or None when
    the request does not mention it.
    """
    value = parse_quantity(capacity["value"])
    policy = capacity.get("requestPolicy") or None
    if requested is None:
        if policy and policy.get("default") is not None:
            return parse_quantity(policy["default"])
        return value
    amount = parse_quantity(requested)
    if amount < 0:
        return NoFit(f"request {_fmt(amount)} is negative")
    if not policy:
        return amount
    if policy.get("validRange"):
        return _round_range(amount, policy["validRange"])
    if policy.get("validValues"):
        return _round_valid_values(amount, policy["validValues"])
    return amount


def consumed_text(capacity: Mapping[str, Any], requested: str | None = None) -> str:
    """The consumedCapacity string the 1.37 scheduler writes for one share: the quantity
    as written wherever an amount is taken as is (the request, also one already on a
    step, the policy's default or min, a valid value, the capacity value), and an amount
    rounded up to a step in the request's format, canonical ("2G" for 1999999999). 1.36
    wrote every stepped amount as a new BinarySI quantity ("1953125Ki" for 2G). Only the
    amount matters to a driver, but one that compares strings must meet the real ones
    here too."""
    policy = capacity.get("requestPolicy") or None
    if requested is None:
        if policy and policy.get("default") is not None:
            return str(policy["default"])
        return str(capacity["value"])
    valid_range = (policy or {}).get("validRange") or {}
    if valid_range.get("min") is not None:
        if parse_quantity(requested) < parse_quantity(valid_range["min"]):
            return str(valid_range["min"])
        amount = consumed_amount(capacity, requested)
        if (valid_range.get("step") is None or isinstance(amount, NoFit)
                or amount == parse_quantity(requested)):
            return str(requested)
        if str(requested).rstrip("0123456789").endswith("i"):
            return binary_si_text(amount)
        return _fmt(amount)
    for candidate in (policy or {}).get("validValues") or []:
        if parse_quantity(requested) <= parse_quantity(candidate):
            return str(candidate)
    return str(requested)


_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))


def binary_si_text(amount: Fraction) -> str:
    """An integer amount as it reads back from the API server after the scheduler wrote
    it as a new BinarySI quantity: with the largest binary suffix that divides it
    exactly ("1953125Ki"); when none does, the plain number the scheduler sends is parsed
    as a decimal quantity and shown in decimal canonical form ("1G", "1500M")."""
    if amount.denominator != 1:
        return _fmt(amount)
    value = amount.numerator
    power = 0
    if not -1024 < value < 1024:
        while power < len(_BINARY_SUFFIXES) - 1 and value % 1024 ** (power + 1) == 0:
            power += 1
    if power:
        return f"{value // 1024 ** power}{_BINARY_SUFFIXES[power]}"
    for exponent, suffix in _DECIMAL_SUFFIXES:
        if value and value % 10**exponent == 0:
            return f"{value // 10**exponent}{suffix}"
    return str(value)


def remaining(value: QuantityLike, consumed: Iterable[QuantityLike]) -> Fraction:
    """What is left of `value` after the already consumed amounts (may be negative)."""
    return parse_quantity(value) - sum((parse_quantity(c) for c in consumed), Fraction(0))


def fits_remaining(
    value: QuantityLike, consumed: Iterable[QuantityLike], amount: QuantityLike
) -> bool:
    """True when `amount` more fits in `value` next to the already `consumed` amounts."""
    return parse_quantity(amount) <= remaining(value, consumed)


def _round_range(amount: Fraction, valid_range: Mapping[str, Any]) -> Fraction | NoFit:
    minimum = parse_quantity(valid_range["min"])
    maximum = _optional(valid_range.get("max"))
    step = _optional(valid_range.get("step"))
    consumed = max(amount, minimum)
    if step is not None and step > 0:
        steps = -((minimum - consumed) // step)  # ceil((consumed - min) / step)
        consumed = minimum + steps * step
    if maximum is not None and consumed > maximum:
        if consumed == amount:
            return NoFit(f"request {_fmt(amount)} is above the policy maximum {_fmt(maximum)}")
        return NoFit(
            f"request {_fmt(amount)} rounds up to {_fmt(consumed)}, "
            f"above the policy maximum {_fmt(maximum)}"
        )
    return consumed


def _round_valid_values(amount: Fraction, valid_values: Iterable[QuantityLike]) -> Fraction | NoFit:
    values = sorted(parse_quantity(v) for v in valid_values)
    for candidate in values:
        if amount <= candidate:
            return candidate
    return NoFit(f"request {_fmt(amount)} is above the largest valid value {_fmt(values[-1])}")


def _optional(value: QuantityLike | None) -> Fraction | None:
    return None if value is None else parse_quantity(value)


def _fmt(value: Fraction) -> str:
    try:
        return format_quantity(value)
    except ValueError:
        return str(value)
