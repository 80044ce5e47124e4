"""The stand-in's own error vocabulary, after apimachinery's `field` package.

A real API server describes each rejected field as a `field.Error`: an error type, the
field path, the bad value and a detail, rendered as
``spec.devices[0].name: Invalid value: "GPU_0": a lowercase RFC 1123 label ...`` and sent as
a StatusCause whose reason is the type's name (`FieldValueInvalid`). The stand-in keeps
that shape (type, value and detail kept apart, the text built the server's way) rather
than sharing the driver's client-side error helpers: its rule book is its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any


class ErrorType(Enum):
    """apimachinery's `field.ErrorType`: the StatusCause reason and the text it starts with."""

    REQUIRED = ("FieldValueRequired", "Required value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_MANY = ("FieldValueTooMany", "Too many")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    NOT_FOUND = ("FieldValueNotFound", "Not found")

    @property
    def reason(self) -> str:
        """The StatusCause reason, e.g. `FieldValueTooMany`."""
        return self.value[0]

    @property
    def text(self) -> str:
        """How the error's message starts, e.g. `Too many`."""
        return self.value[1]


# The types whose message never shows the bad value (the server omits it).
_VALUE_OMITTED = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG})
_NO_VALUE = object()


@dataclass(frozen=True)
class FieldError:
    """One rejected field: its path, the error type, the bad value and why."""

    field: str
    type: ErrorType
    detail: str = ""
    bad_value: Any = _NO_VALUE

    @property
    def reason(self) -> str:
        """The StatusCause reason the server sends (`FieldValueRequired`, ...)."""
        return self.type.reason

    @property
    def message(self) -> str:
        """The error body as the server writes it, without the field path."""
        text = self.type.text
        if self.type not in _VALUE_OMITTED and self.bad_value is not _NO_VALUE:
            text += f": {show(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def show(value: Any) -> str:
    """A bad value as the server prints it: strings quoted, numbers and booleans bare."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def required(path: str, detail: str = "") -> FieldError:
    """`Required value`: a field that must be set is missing or empty."""
    return FieldError(path, ErrorType.REQUIRED, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """`Invalid value`: the value breaks a rule."""
    return FieldError(path, ErrorType.INVALID, detail, value)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    """`Invalid value` of the wrong JSON type (reason FieldValueTypeInvalid)."""
    return FieldError(path, ErrorType.TYPE_INVALID, detail, value)


def forbidden(path: str, detail: str) -> FieldError:
    """`Forbidden`: the field may not be set here."""
    return FieldError(path, ErrorType.FORBIDDEN, detail)


def too_many(path: str, actual: int, limit: int) -> FieldError:
    """`Too many`: a list or map over its size limit (the count is the bad value)."""
    return FieldError(path, ErrorType.TOO_MANY, f"must have at most {limit} items", actual)


def too_long(path: str, limit: int) -> FieldError:
    """`Too long`: a string over its byte limit (the value is not shown)."""
    return FieldError(path, ErrorType.TOO_LONG, f"may not be more than {limit} bytes")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    """`Unsupported value`: not one of an enumeration, which the detail lists."""
    allowed = ", ".join(json.dumps(s) for s in supported)
    return FieldError(path, ErrorType.NOT_SUPPORTED, f"supported values: {allowed}", value)


def duplicate(path: str, value: Any) -> FieldError:
    """`Duplicate value`: the key of a set's item came before."""
    return FieldError(path, ErrorType.DUPLICATE, "", value)
