"""Kubernetes resource.Quantity parsing and formatting, exact (Fractions, never floats).

Capacity accounting compares sums of quantities; floats would let 0.1G + 0.2G drift
past a limit, so every value here is a `fractions.Fraction`.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import TypeVar

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?[0-9]+))?$"
)

# Far beyond any real amount. Exact arithmetic on "1e999999999" (API data: a claim's
# opaque config or consumedCapacity) would take minutes and gigabytes, and Python cannot
# print integers of more than 4300 digits, so longer or larger values are refused.
MAX_LENGTH = 100
MAX_EXPONENT = 1000


class QuantityError(ValueError):
    """A string is not a valid Kubernetes quantity.

    Example::

        try:
            size = parse_quantity(raw)
        except QuantityError as exc:  # "'4 GB' is not a valid quantity"
            problems.append(f"spec.size: {exc}")
    """


def parse_quantity(value: str | int | Fraction) -> Fraction:
    """Parse a Kubernetes quantity ("10G", "1Mi", "500m", "1e3", 8) into an exact Fraction.

    Example::

        parse_quantity("1.5Gi")  # Fraction(1610612736)
        parse_quantity("500m")   # Fraction(1, 2)
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or integer, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or integer, got {type(value).__name__}")
    return _parse_text(value)


# Every claim of a node carries the same few amounts ("1G", "10G"), and a Fraction is
# slow to build: parsing was a twelfth of a prepare's Python time. Bounded, and errors
# are not kept, so hostile input only churns it.
@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    text = value.strip()
    if len(text) > MAX_LENGTH:
        raise QuantityError(
            f"{text[:20]!r}... is out of range: longer than {MAX_LENGTH} characters"
        )
    match = _QUANTITY.match(text)
    if not match or not text:
        raise QuantityError(f"{value!r} is not a valid quantity")
    number = Fraction(match["num"])
    if match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(f"{value!r} is out of range: exponent beyond ±{MAX_EXPONENT}")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


def format_quantity(value: Fraction | int) -> str:
    """Format an exact value as the shortest canonical quantity string.

    Integers take whichever suffix family gives the shorter text ("1Gi", "10G", "1500");
    fractions are written in milli-units ("1500m") when exact.

    Example::

        format_quantity(10**10)               # "10G"
        format_quantity(Fraction(3, 2) * 2**30)  # "1536Mi"
        format_quantity(Fraction(1, 2))       # "500m"
    """
    value = Fraction(value)
    if value.denominator != 1:
        milli = value * 1000
        if milli.denominator == 1:
            return f"{milli.numerator}m"
        raise QuantityError(f"{value} cannot be written exactly as a quantity")
    number = value.numerator
    if number == 0:
        return "0"
    candidates = [_with_suffix(number, _BINARY), _with_suffix(number, _DECIMAL)]
    return min(candidates, key=len)


_Factor = TypeVar("_Factor", int, Fraction)  # a suffix table's values: all int, or all Fraction


def _with_suffix(number: int, table: dict[str, _Factor]) -> str:
    """`number` with the largest suffix of `table` that divides it exactly."""
    for suffix, factor in reversed(table.items()):
        if factor >= 1 and number % int(factor) == 0:
            return f"{number // int(factor)}{suffix}"
    return str(number)


def ceil_int(value: Fraction) -> int:
    """The integer value of a quantity rounded up, as the API server's step checks use it.

    Example::

        ceil_int(parse_quantity("3500m"))  # 4
    """
    return -((-value.numerator) // value.denominator)


def quantity_text(amount: Fraction | int) -> str:
    """An amount for messages and reports: the canonical quantity ("10G", "1500m", "-2Gi"),
    or the exact fraction when no quantity can write it (below milli precision).

    Example::

        quantity_text(-(2**31))        # "-2Gi"
        quantity_text(Fraction(1, 3))  # "1/3"
    """
    amount = Fraction(amount)
    if amount < 0:
        return "-" + quantity_text(-amount)
    try:
        return format_quantity(amount)
    except QuantityError:
        return str(amount)
