"""Quantities written for people in error messages ("9.5G" rather than "9500M")."""

from __future__ import annotations

from fractions import Fraction

from simdra._driver.core.quantity import QuantityError, format_quantity

_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def human_quantity(value: Fraction | int) -> str:
    """A short, exact quantity: binary suffix when exact, else up to 2 decimals."""
    value = Fraction(value)
    try:
        text = format_quantity(value)
    except QuantityError:
        return str(float(value))
    if text.endswith("i") or value.denominator != 1:
        return text
    for suffix, factor in _DECIMAL:
        scaled = value / factor
        if abs(value) >= factor and (scaled * 100).denominator == 1:
            number = f"{float(scaled):.2f}".rstrip("0").rstrip(".")
            return f"{number}{suffix}"
    return text
