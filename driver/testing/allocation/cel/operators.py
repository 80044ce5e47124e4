"""CEL's operators as cel-go runs them for the Kubernetes environment.

celpy's defaults differ in three places that selectors hit: equality between values of
different types is an error there, but `false` in cel-go (heterogeneous equality, so
`attr == "3"` on an int attribute is simply false); ordering across int / uint / double
is allowed in Kubernetes (CrossTypeNumericComparisons); and `&&` / `||` accept
non-bool operands there. Each function gets evaluated operands, a CELEvalError among
them is passed on unless `&&` / `||` can absorb it (CEL's commutative logic).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from driver.testing.allocation.cel.values import Quantity, Semver, type_name

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def no_overload(what: str) -> CELEvalError:
    """A runtime "no such overload" error, worded as cel-go words it."""
    return CELEvalError(f"no such overload: {what}")


def equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: values of unrelated types are unequal, never an error."""
    if isinstance(a, celtypes.BoolType) or isinstance(b, celtypes.BoolType):
        return type(a) is type(b) and bool(a) == bool(b)
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
    return type(a) is type(b) and a == b


def _number(value: Any) -> int | float:
    # Python compares int with float exactly, as cel-go's cross-type comparison does.
    return float(value) if isinstance(value, celtypes.DoubleType) else int(value)


def _lookup(mapping: dict[Any, Any], key: Any) -> Any:
    return next(v for k, v in mapping.items() if equal(k, key))


def _error_of(*values: Any) -> CELEvalError | None:
    return next((v for v in values if isinstance(v, CELEvalError)), None)


def op_eq(a: Any, b: Any) -> Any:
    """`a == b`."""
    return _error_of(a, b) or celtypes.BoolType(equal(a, b))


def op_ne(a: Any, b: Any) -> Any:
    """`a != b`."""
    return _error_of(a, b) or celtypes.BoolType(not equal(a, b))


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
        same = type(a) is type(b)
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


OPERATORS: dict[str, Callable[..., Any]] = {
    "_==_": op_eq,
    "_!=_": op_ne,
    "_in_": op_in,
    "_<_": _ordering("<", operator.lt),
    "_<=_": _ordering("<=", operator.le),
    "_>_": _ordering(">", operator.gt),
    "_>=_": _ordering(">=", operator.ge),
    "_&&_": _logical(False, "&&"),
    "_||_": _logical(True, "||"),
    "!_": op_not,
}
