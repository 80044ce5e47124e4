"""Numeric flag values in a range, with the one-line errors `simdra run` and `simdra
fleet` both give (pure)."""

from __future__ import annotations


class FlagValueError(ValueError):
    """A flag's value is not a number or out of range; the message names the flag."""


def bounded_int(value: str, flag: str, low: int, high: int) -> int:
    """`value` as an integer in [low, high]."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise FlagValueError(f"{flag}={value!r}: not an integer") from None
    if not low <= number <= high:
        raise FlagValueError(f"{flag}={number}: must be between {low} and {high}")
    return number


def bounded_number(value: str, flag: str, low: float, high: float) -> float:
    """`value` as a number in [low, high]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise FlagValueError(f"{flag}={value!r}: not a number") from None
    if not low <= number <= high:
        raise FlagValueError(f"{flag}={number:g}: must be between {low:g} and {high:g}")
    return number
