"""cel-go's strings extension, version 2 (what the Kubernetes environment loads).

`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
`substring`, `trim` on strings and `join` on lists of strings. Indexes count code points,
as cel-go counts runes; an index out of range is a runtime error, as there.
`startsWith`, `endsWith` and `size` are CEL's standard functions, which celpy provides;
`contains` is too, but celpy's also accepts a list, so it is defined here for strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.testing.allocation.cel.operators import no_overload
from simdra._driver.testing.allocation.cel.values import type_name

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _string_method(name: str, *arg_types: type) -> Callable[[Callable[..., Any]], Any]:
    """Check the receiver and argument types, then call the implementation."""

    def decorate(implementation: Callable[..., Any]) -> Callable[..., Any]:
        def evaluate(text: Any, *args: Any) -> Any:
            types_ok = len(args) <= len(arg_types) and all(
                isinstance(a, t) and not isinstance(a, celtypes.BoolType)
                for a, t in zip(args, arg_types, strict=False)
            )
            if not isinstance(text, str) or not types_ok:
                signature = ", ".join(type_name(a) for a in args)
                return no_overload(f"{type_name(text)}.{name}({signature})")
            return implementation(str(text), *args)

        return evaluate

    return decorate


def _out_of_range(index: int, name: str) -> CELEvalError:
    return CELEvalError(f"{name}: index out of range: {index}")


@_string_method("charAt", int)
def char_at(text: str, index: int) -> Any:
    """`s.charAt(i)`: the code point at i; "" at len(s)."""
    if not 0 <= index <= len(text):
        return _out_of_range(index, "charAt")
    return celtypes.StringType(text[index : index + 1])


@_string_method("indexOf", str, int)
def index_of(text: str, sub: str, offset: int = 0) -> Any:
    """`s.indexOf(sub[, offset])`: the first index of sub at or after offset, else -1.

    As cel-go: "" is found at the offset itself, a negative offset is an error, an
    offset past the end finds nothing.
    """
    if not sub:
        return celtypes.IntType(offset)
    if offset < 0:
        return _out_of_range(offset, "indexOf")
    return celtypes.IntType(text.find(sub, offset) if offset < len(text) else -1)


@_string_method("lastIndexOf", str, int)
def last_index_of(text: str, sub: str, offset: int | None = None) -> Any:
    """`s.lastIndexOf(sub[, offset])`: the last index of sub at or before offset, else -1."""
    if offset is None:
        if not sub:
            return celtypes.IntType(len(text))
        offset = len(text) - 1
    if not sub:
        return celtypes.IntType(offset)
    if offset < 0:
        return _out_of_range(offset, "lastIndexOf")
    if offset >= len(text):
        return celtypes.IntType(-1)
    return celtypes.IntType(text.rfind(sub, 0, offset + len(sub)))


@_string_method("lowerAscii")
def lower_ascii(text: str) -> Any:
    """`s.lowerAscii()`: ASCII letters lowered, others unchanged."""
    return celtypes.StringType(text.translate(_ASCII_LOWER))


@_string_method("upperAscii")
def upper_ascii(text: str) -> Any:
    """`s.upperAscii()`."""
    return celtypes.StringType(text.translate(_ASCII_UPPER))


@_string_method("replace", str, str, int)
def replace(text: str, old: str, new: str, count: int = -1) -> Any:
    """`s.replace(old, new[, n])`: n < 0 replaces all."""
    return celtypes.StringType(text.replace(old, new, count if count >= 0 else -1))


@_string_method("split", str, int)
def split(text: str, separator: str, limit: int = -1) -> Any:
    """`s.split(sep[, n])` with Go's SplitN rules: n == 0 gives [], n > 0 at most n parts."""
    if limit == 0:
        return celtypes.ListType()
    if separator:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    else:
        head = list(text) if limit < 0 else list(text[: limit - 1])
        rest = text[len(head) :]
        parts = head + ([rest] if rest else [])
    return celtypes.ListType(celtypes.StringType(p) for p in parts)


@_string_method("substring", int, int)
def substring(text: str, start: int, end: int | None = None) -> Any:
    """`s.substring(start[, end])`."""
    if end is None:
        if not 0 <= start <= len(text):
            return _out_of_range(start, "substring")
        return celtypes.StringType(text[start:])
    stop = end
    if start > stop:
        return CELEvalError(f"substring: invalid substring range. start: {start}, end: {stop}")
    for index in (start, stop):
        if not 0 <= index <= len(text):
            return _out_of_range(index, "substring")
    return celtypes.StringType(text[start:stop])


@_string_method("contains", str)
def contains(text: str, sub: str) -> Any:
    """`s.contains(sub)` (strings only: a list uses `in`)."""
    return celtypes.BoolType(sub in text)


@_string_method("trim")
def trim(text: str) -> Any:
    """`s.trim()`: leading and trailing white space removed."""
    return celtypes.StringType(text.strip())


def join(items: Any, separator: Any = "") -> Any:
    """`list.join([sep])`: a list of strings joined."""
    if not isinstance(items, list) or not isinstance(separator, str):
        return no_overload(f"{type_name(items)}.join({type_name(separator)})")
    if not all(isinstance(item, str) for item in items):
        return no_overload("join of a list that is not all strings")
    return celtypes.StringType(str(separator).join(items))


STRING_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "contains": contains,
    "join": join,
}
