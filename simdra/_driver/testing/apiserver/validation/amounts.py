"""Quantities as the API server compares them: exact amounts, and the rounded-up integer
`Quantity.Value()` that its integer arithmetic uses.

By the time a body is validated every quantity in it has decoded (`decode` answers 400
for one that does not), so these only see well-formed text; anything else reads as None.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

_FORM = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def amount(value: Any) -> Fraction | None:
    """The exact amount of a quantity (a string like "10Gi", or a JSON number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        value = repr(value)
    match = _FORM.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    number, suffix = Fraction(match[1]), match[2] or ""
    if suffix in _BINARY:
        return number * (1 << (10 * _BINARY[suffix]))
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    return number * Fraction(10**exponent) if exponent >= 0 else number / 10**-exponent


def decimal_key(value: Any) -> str:
    """How 1.37 tells validValues apart with DRAFractionalCapacityRange (`AsDec().String()`):
    the decimal as parsed, keeping the digits written after the point, so "1" and "1000m"
    ("1.000") differ while "1k" and "1000" are the same option."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = repr(value)
    match = _FORM.match(value.strip()) if isinstance(value, str) else None
    parsed = amount(value)
    if match is None or parsed is None or (match[2] or "") in _BINARY:
        return str(value) if parsed is None else str(parsed)
    suffix = match[2] or ""
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    digits = len(match[1].partition(".")[2]) - exponent
    if digits <= 0:
        return str(whole(parsed))
    sign, magnitude = ("-" if parsed < 0 else ""), abs(parsed) * 10**digits
    number = str(magnitude.numerator // magnitude.denominator).rjust(digits + 1, "0")
    return f"{sign}{number[:-digits]}.{number[-digits:]}"


def is_fractional(value: Fraction) -> bool:
    """True for an amount below whole units (1.5, 100m): the milli path of 1.37."""
    return value.denominator != 1


def milli_exact(value: Fraction) -> bool:
    """True when `value` is a whole number of thousandths (`MilliValue()` loses nothing)."""
    return (value * 1000).denominator == 1


def whole(value: Fraction) -> int:
    """`Quantity.Value()`: the amount rounded up to an integer."""
    return math.ceil(value)


def text(value: Fraction) -> str:
    """An amount written back for a message: an integer plainly, else as a decimal."""
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), "g")
