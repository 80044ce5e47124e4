"""The Kubernetes CEL value types a selector sees beside CEL's own: quantity and semver.

Both behave like their Go counterparts in the Kubernetes CEL library: a quantity is an
exact number (`resource.Quantity`, compared with `Cmp`), a semver is ordered by semantic
version precedence with build metadata ignored (`blang/semver`, `Compare`). Neither has
`<` or `==` overloads of its own beyond value equality: ordering goes through the
`compareTo` / `isLessThan` / `isGreaterThan` methods, as in Kubernetes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from celpy import celtypes

from simdra._driver.core.quantity import QuantityError, format_quantity, parse_quantity

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes quantity (exact)."""

    value: Fraction

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """The quantity `text` spells; QuantityError when it is not one."""
        if text != text.strip():  # resource.ParseQuantity takes no surrounding space
            raise QuantityError(f"{text!r} is not a valid quantity")
        return cls(parse_quantity(text))

    def compare(self, other: Quantity) -> int:
        """-1, 0 or 1, like `resource.Quantity.Cmp`."""
        return (self.value > other.value) - (self.value < other.value)

    def as_int64(self) -> int | None:
        """The value as an int64, or None when it is fractional or out of range."""
        if self.value.denominator != 1 or not INT64_MIN <= self.value <= INT64_MAX:
            return None
        return self.value.numerator

    def __str__(self) -> str:
        try:
            return format_quantity(self.value)
        except QuantityError:
            return str(self.value)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class SemverError(ValueError):
    """A string is not a semantic version."""


@dataclass(frozen=True, eq=False)
class Semver:
    """A semantic version (2.0.0): ordered by precedence, build metadata ignored."""

    text: str
    key: tuple[Any, ...]

    @classmethod
    def parse(cls, text: str) -> Semver:
        """Strict parse, as `semver("1.2.3")`; SemverError when `text` is not a version."""
        match = _SEMVER.match(text)
        if not match:
            raise SemverError(f"{text!r} is not a semantic version")
        major, minor, patch, pre, _build = match.groups()
        core = (int(major), int(minor), int(patch))
        if pre is None:
            return cls(text, (*core, 1, ()))
        parts = pre.split(".")
        if any(p.isdigit() and len(p) > 1 and p[0] == "0" for p in parts):
            raise SemverError(f"{text!r}: numeric pre-release identifiers have no leading zeros")
        return cls(
            text, (*core, 0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts))
        )

    @classmethod
    def parse_normalized(cls, text: str) -> Semver:
        """`semver(text, true)`: drop a leading "v", leading zeros; pad "1" / "1.2" with ".0"."""
        parts = text.removeprefix("v").split(".", 2)
        parts = [_strip_zeros(p) for p in parts]
        if len(parts) < 3:
            if any(c in parts[-1] for c in "+-"):
                raise SemverError(f"{text!r}: a short version has no pre-release or build")
            parts += ["0"] * (3 - len(parts))
        return cls.parse(".".join(parts))

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semantic version precedence."""
        return (self.key > other.key) - (self.key < other.key)

    def __str__(self) -> str:
        return self.text


def _strip_zeros(part: str) -> str:
    if len(part) <= 1:
        return part
    stripped = part.lstrip("0")
    return stripped if stripped[:1].isdigit() else "0" + stripped


class DomainMap(celtypes.MapType):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map.

    Membership (`"d" in device.attributes`) and size still see only the domains present,
    as the Kubernetes wrapper changes only the lookup.
    """

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not super().__contains__(key):
            return celtypes.MapType()
        return super().__getitem__(key)


def type_name(value: Any) -> str:
    """The CEL type name of a value, for error messages."""
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (celtypes.BoolType, "bool"),
    (celtypes.UintType, "uint"),
    (celtypes.IntType, "int"),
    (celtypes.DoubleType, "double"),
    (celtypes.StringType, "string"),
    (celtypes.BytesType, "bytes"),
    (celtypes.ListType, "list"),
    (celtypes.MapType, "map"),
    (celtypes.TimestampType, "google.protobuf.Timestamp"),
    (celtypes.DurationType, "google.protobuf.Duration"),
    (Quantity, "kubernetes.Quantity"),
    (Semver, "kubernetes.Semver"),
    (bool, "bool"),
    (int, "int"),
    (float, "double"),
    (str, "string"),
    (list, "list"),
    (dict, "map"),
    (type(None), "null_type"),
)
