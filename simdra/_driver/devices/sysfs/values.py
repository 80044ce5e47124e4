"""Building ResourceSlice attribute values that always pass API validation (pure)."""

from __future__ import annotations

import re
from typing import Any

MAX_STRING = 64  # resource.k8s.io/v1: string and version values are at most 64 characters

_NUMBERS = re.compile(r"\d+")


def string_attr(value: str) -> dict[str, Any]:
    """A string attribute, cut to the API's 64-character limit."""
    return {"string": value[:MAX_STRING]}


def int_attr(value: int) -> dict[str, Any]:
    """An int attribute."""
    return {"int": int(value)}


def bool_attr(value: bool) -> dict[str, Any]:
    """A bool attribute."""
    return {"bool": bool(value)}


def version_attr(value: str) -> dict[str, Any]:
    """A version attribute; `value` must already be semver (see `to_semver`)."""
    return {"version": value}


def to_semver(text: str) -> str | None:
    """A valid semver 2.0.0 `MAJOR.MINOR.PATCH` from a vendor version string, or None.

    Vendor versions are often not semver: NVIDIA writes `535.104.05` (a leading zero is
    forbidden) or `550.54` (two parts). The first three numbers are kept, leading zeros
    dropped and missing parts filled with 0; anything after them is ignored.
    """
    numbers = [int(n) for n in _NUMBERS.findall(text)[:3]]
    if not numbers:
        return None
    numbers += [0] * (3 - len(numbers))
    version = ".".join(str(n) for n in numbers)
    return version if len(version) <= MAX_STRING else None
