"""The Kubernetes CEL libraries DRA selectors use: quantity, semver, `includes`.

Written from the Kubernetes library documentation (k8s.io/apiserver/pkg/cel/library):
`quantity(s)`, `isQuantity(s)`, `sign(q)` and a quantity's `compareTo`, `isGreaterThan`,
`isLessThan`, `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`;
`semver(s[, normalize])`, `isSemver(s[, normalize])` and a version's `compareTo`,
`isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`; DRA's `includes` (a list
attribute contains a value, or a scalar attribute equals it). celpy calls `x.f(y)` as
`f(x, y)`, so each method is a function of its receiver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.core.quantity import QuantityError
from simdra._driver.testing.allocation.cel.operators import equal, no_overload
from simdra._driver.testing.allocation.cel.values import Quantity, Semver, SemverError, type_name

Function = Callable[..., Any]


def _signature(name: str, *args: Any) -> str:
    return f"{name}({', '.join(type_name(a) for a in args)})"


def quantity(text: Any) -> Any:
    """`quantity("1Gi")`."""
    if not isinstance(text, str):
        return no_overload(_signature("quantity", text))
    text = str(text)  # a celpy StringType would show its class name in messages
    try:
        return Quantity.parse(text)
    except QuantityError as error:
        return CELEvalError(f"quantity({text!r}): {error}")


def is_quantity(text: Any) -> Any:
    """`isQuantity("1Gi")`."""
    if not isinstance(text, str):
        return no_overload(_signature("isQuantity", text))
    return celtypes.BoolType(not isinstance(quantity(text), CELEvalError))


def semver(text: Any, normalize: Any = False) -> Any:
    """`semver("1.2.3")`, `semver("v1.2", true)`."""
    if not isinstance(text, str) or not isinstance(normalize, bool | celtypes.BoolType):
        return no_overload(_signature("semver", text, normalize))
    text = str(text)
    try:
        return Semver.parse_normalized(text) if normalize else Semver.parse(text)
    except SemverError as error:
        return CELEvalError(f"semver({text!r}): {error}")


def is_semver(text: Any, normalize: Any = False) -> Any:
    """`isSemver("1.2.3")`."""
    value = semver(text, normalize)
    if isinstance(value, CELEvalError) and str(value.args[0]).startswith("no such overload"):
        return value
    return celtypes.BoolType(isinstance(value, Semver))


def _comparison(name: str, result: Callable[[int], Any]) -> Function:
    """compareTo / isGreaterThan / isLessThan of two quantities or two versions."""

    def evaluate(value: Any, other: Any) -> Any:
        if isinstance(value, Quantity) and isinstance(other, Quantity):
            return result(value.compare(other))
        if isinstance(value, Semver) and isinstance(other, Semver):
            return result(value.compare(other))
        return no_overload(f"{type_name(value)}.{_signature(name, other)}")

    return evaluate


def _quantity_method(name: str, compute: Callable[..., Any]) -> Function:
    def evaluate(value: Any, *args: Any) -> Any:
        if not isinstance(value, Quantity):
            return no_overload(f"{type_name(value)}.{_signature(name, *args)}")
        return compute(value, *args)

    return evaluate


def _as_integer(value: Quantity) -> Any:
    number = value.as_int64()
    if number is None:
        return CELEvalError(f"quantity {value}: cannot convert value to integer")
    return celtypes.IntType(number)


def _arithmetic(name: str, sign: int) -> Function:
    def compute(value: Quantity, other: Any) -> Any:
        if isinstance(other, Quantity):
            return Quantity(value.value + sign * other.value)
        if isinstance(other, celtypes.IntType):
            return Quantity(value.value + sign * int(other))
        return no_overload(f"kubernetes.Quantity.{_signature(name, other)}")

    return _quantity_method(name, compute)


def _version_part(name: str, index: int) -> Function:
    def evaluate(value: Any) -> Any:
        if not isinstance(value, Semver):
            return no_overload(f"{type_name(value)}.{name}()")
        return celtypes.IntType(value.key[index])

    return evaluate


def _as_float(value: Quantity) -> Any:
    try:
        return celtypes.DoubleType(float(value.value))
    except OverflowError:  # Go's AsApproximateFloat64 gives an infinity here
        return celtypes.DoubleType(float("inf") if value.value > 0 else float("-inf"))


def _sign(value: Quantity) -> Any:
    return celtypes.IntType((value.value > 0) - (value.value < 0))


def includes(target: Any, value: Any) -> Any:
    """DRA `includes`: a list attribute holds `value`, or a scalar attribute equals it."""
    if isinstance(target, list):
        return celtypes.BoolType(any(equal(item, value) for item in target))
    return celtypes.BoolType(equal(target, value))


KUBERNETES_FUNCTIONS: dict[str, Function] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "semver": semver,
    "isSemver": is_semver,
    "compareTo": _comparison("compareTo", celtypes.IntType),
    "isGreaterThan": _comparison("isGreaterThan", lambda order: celtypes.BoolType(order > 0)),
    "isLessThan": _comparison("isLessThan", lambda order: celtypes.BoolType(order < 0)),
    "sign": _quantity_method("sign", _sign),  # sign(q): a global function in Kubernetes
    "isInteger": _quantity_method(
        "isInteger", lambda value: celtypes.BoolType(value.as_int64() is not None)
    ),
    "asInteger": _quantity_method("asInteger", _as_integer),
    "asApproximateFloat": _quantity_method("asApproximateFloat", _as_float),
    "add": _arithmetic("add", 1),
    "sub": _arithmetic("sub", -1),
    "major": _version_part("major", 0),
    "minor": _version_part("minor", 1),
    "patch": _version_part("patch", 2),
    "includes": includes,
}
