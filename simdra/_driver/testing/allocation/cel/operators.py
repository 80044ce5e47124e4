"""CEL's operators as cel-go runs them for the Kubernetes environment.

celpy's defaults differ in three places that selectors hit: equality between values of
different types is an error there, but `false` in cel-go (heterogeneous equality, so
`attr == "3"` on an int attribute is simply false); ordering across int / uint / double
is allowed in Kubernetes (CrossTypeNumericComparisons); and `&&` / `||` accept
non-bool operands there. Each function gets evaluated operands, a CELEvalError among
them is passed on unless `&&` / `||` can absorb it (CEL's commutative logic).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.testing.allocation.cel.values import Quantity, Semver, type_name

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def no_overload(what: str) -> CELEvalError:
    """A runtime "no such overload" error, worded as cel-go words it."""
    return CELEvalError(f"no such overload: {what}")


def equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: values of unrelated types are unequal."""
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return a == b if type(a) is type(b) else _number(a) == _number(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(
            any(equal(k, j) for j in b) and equal(v, _lookup(b, k)) for k, v in a.items()
        )
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.compare(b) == 0
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b) == 0
    if isinstance(a, type) or isinstance(b, type):  # type values: `type(1) == int`
        return a is b
    # By CEL type, not Python class: celpy's `+` on strings gives a plain str.
    return type_name(a) == type_name(b) and a == b


def _number(value: Any) -> int | float:
    # Python compares int with float exactly, as cel-go's cross-type comparison does.
    return float(value) if isinstance(value, celtypes.DoubleType) else int(value)


def _lookup(mapping: dict[Any, Any], key: Any) -> Any:
    return next(v for k, v in mapping.items() if equal(k, key))


def _error_of(*values: Any) -> CELEvalError | None:
    return next((v for v in values if isinstance(v, CELEvalError)), None)


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    """`==` / `!=` as cel-go evaluates them.

    null equals only null; otherwise cel-go asks the left operand: the Kubernetes
    Quantity and Semver types answer "no such overload" for another type (an error for
    `==`; `!=` is true when `==` is not true), CEL's own types answer false.
    """

    def evaluate(a: Any, b: Any) -> Any:
        error = _error_of(a, b)
        if error:
            return error
        if a is None or b is None:
            return celtypes.BoolType(((a is None) == (b is None)) is not negate)
        if isinstance(a, Quantity | Semver) and type(a) is not type(b):
            # `!=` is "not equal to true" in cel-go: never this error.
            return celtypes.BoolType(True) if negate else no_overload(
                f"{type_name(a)} == {type_name(b)}")  # fmt: skip
        return celtypes.BoolType(equal(a, b) is not negate)

    return evaluate


def op_in(item: Any, container: Any) -> Any:
    """`item in list` (some element equal) or `key in map` (a key equal)."""
    error = _error_of(item, container)
    if error:
        return error
    if isinstance(container, list | dict):
        return celtypes.BoolType(any(equal(item, element) for element in container))
    return no_overload(f"{type_name(item)} in {type_name(container)}")


_ORDERED = (
    celtypes.StringType,
    celtypes.BytesType,
    celtypes.TimestampType,
    celtypes.DurationType,
)


def _ordering(symbol: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def evaluate(a: Any, b: Any) -> Any:
        error = _error_of(a, b)
        if error:
            return error
        if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
            return celtypes.BoolType(compare(_number(a), _number(b)))
        same = type_name(a) == type_name(b)
        if same and isinstance(a, celtypes.BoolType):
            return celtypes.BoolType(compare(bool(a), bool(b)))
        if same and isinstance(a, _ORDERED):
            return celtypes.BoolType(compare(a, b))
        return no_overload(f"{type_name(a)} {symbol} {type_name(b)}")

    evaluate.__name__ = f"_{symbol}_"
    return evaluate


def _logical(decisive: bool, symbol: str) -> Callable[[Any, Any], Any]:
    """`&&` (decisive False) or `||` (decisive True): one decisive operand decides."""

    def evaluate(a: Any, b: Any) -> Any:
        if any(isinstance(v, celtypes.BoolType) and bool(v) is decisive for v in (a, b)):
            return celtypes.BoolType(decisive)
        error = _error_of(a, b)
        if error:
            return error
        if isinstance(a, celtypes.BoolType) and isinstance(b, celtypes.BoolType):
            return celtypes.BoolType(not decisive)
        return no_overload(f"{type_name(a)} {symbol} {type_name(b)}")

    return evaluate


def op_not(value: Any) -> Any:
    """`!value`."""
    if isinstance(value, CELEvalError):
        return value
    if isinstance(value, celtypes.BoolType):
        return celtypes.BoolType(not value)
    return no_overload(f"!{type_name(value)}")


def op_add(a: Any, b: Any) -> Any:
    """`a + b` as celpy computes it, with a CEL-typed result (celpy gives str / list)."""
    error = _error_of(a, b)
    if error:
        return error
    result = operator.add(a, b)
    for kind, wrap in _WRAPPERS:
        if type(result) is kind:
            return wrap(result)
    return result


_WRAPPERS: tuple[tuple[type, Any], ...] = (
    (str, celtypes.StringType),
    (list, celtypes.ListType),
    (bytes, celtypes.BytesType),
)


def op_divide(a: Any, b: Any) -> Any:
    """`a / b`; a double divided by zero is IEEE 754 (inf, or NaN for 0.0 / 0.0)."""
    error = _error_of(a, b)
    if error:
        return error
    if isinstance(a, celtypes.DoubleType) and isinstance(b, celtypes.DoubleType) and not b:
        x, y = float(a), float(b)  # celpy's DoubleType refuses to compare with a Python int
        if x == 0.0 or math.isnan(x):
            return celtypes.DoubleType(math.nan)
        return celtypes.DoubleType(math.copysign(math.inf, x) * math.copysign(1.0, y))
    return operator.truediv(a, b)


def op_index(container: Any, key: Any) -> Any:
    """`list[i]` (in bounds, else an error) and `map[key]` ("no such key")."""
    error = _error_of(container, key)
    if error:
        return error
    if isinstance(container, list):
        if not isinstance(key, celtypes.IntType | celtypes.UintType):
            return no_overload(f"list[{type_name(key)}]")
        if not 0 <= key < len(container):
            return CELEvalError(f"index out of bounds: {key}")
        return container[key]
    if isinstance(container, dict):
        try:
            return container[key]
        except KeyError:
            return CELEvalError(f"no such key: {key}")
    return CELEvalError(f"no such key: {key}")


_DECIMAL = re.compile(r"^[+-]?[0-9]+$")


def _conversion(name: str, convert: Any) -> Callable[[Any], Any]:
    """int() / uint(): a string must be plain decimal, as Go's strconv parses it."""

    def evaluate(value: Any) -> Any:
        if isinstance(value, str) and not _DECIMAL.match(value):
            return CELEvalError(f"type conversion error from 'string' to '{name}'")
        return convert(value)

    return evaluate


# Called for `int(x)` / `uint(x)`; the names themselves stay celpy's type values
# (`type(1) == int`).
CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "int": _conversion("int", celtypes.IntType),
    "uint": _conversion("uint", celtypes.UintType),
}

OPERATORS: dict[str, Callable[..., Any]] = {
    "_==_": _equality(negate=False),
    "_!=_": _equality(negate=True),
    "_+_": op_add,
    "_/_": op_divide,
    "_[_]": op_index,
    "_in_": op_in,
    "_<_": _ordering("<", operator.lt),
    "_<=_": _ordering("<=", operator.le),
    "_>_": _ordering(">", operator.gt),
    "_>=_": _ordering(">=", operator.ge),
    "_&&_": _logical(False, "&&"),
    "_||_": _logical(True, "||"),
    "!_": op_not,
}
