"""Kubernetes' lists library and cel-go's sets extension, both in the Kubernetes environment.

Lists: `l.isSorted()`, `l.sum()`, `l.min()`, `l.max()`, `l.indexOf(x)`, `l.lastIndexOf(x)`
(`indexOf` / `lastIndexOf` on a string are the strings extension's). Sets:
`sets.contains(a, b)` (every element of b is in a), `sets.equivalent(a, b)`,
`sets.intersects(a, b)`. Elements compare with CEL equality and ordering.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from driver.testing.allocation.cel.operators import OPERATORS, equal, no_overload
from driver.testing.allocation.cel.strings import STRING_FUNCTIONS
from driver.testing.allocation.cel.values import type_name

_LESS = OPERATORS["_<_"]


def _list_method(name: str, implementation: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(items: Any, *args: Any) -> Any:
        if not isinstance(items, list):
            return no_overload(f"{type_name(items)}.{name}()")
        return implementation(items, *args)

    return evaluate


def _ordered(items: list[Any]) -> Any:
    """True when sorted, or the ordering error of two elements that do not compare."""
    for a, b in itertools.pairwise(items):
        later = _LESS(b, a)
        if not isinstance(later, celtypes.BoolType):
            return later
        if later:
            return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _extreme(name: str, pick_less: bool) -> Callable[[list[Any]], Any]:
    def evaluate(items: list[Any]) -> Any:
        if not items:
            return CELEvalError(f"{name}(list) called on an empty list")
        best = items[0]
        for item in items[1:]:
            less = _LESS(item, best) if pick_less else _LESS(best, item)
            if not isinstance(less, celtypes.BoolType):
                return less
            if less:
                best = item
        return best

    return evaluate


def _sum(items: list[Any]) -> Any:
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        if type(item) is not type(total) or not isinstance(item, int | float):
            return no_overload(f"sum of {type_name(total)} and {type_name(item)}")
        total = type(total)(total + item)
    return total


def _index(last: bool) -> Callable[[list[Any], Any], Any]:
    def evaluate(items: list[Any], value: Any) -> Any:
        order = range(len(items) - 1, -1, -1) if last else range(len(items))
        return celtypes.IntType(next((i for i in order if equal(items[i], value)), -1))

    return evaluate


def _on_list_or_string(name: str, on_list: Callable[..., Any]) -> Callable[..., Any]:
    on_string = STRING_FUNCTIONS[name]

    def evaluate(target: Any, *args: Any) -> Any:
        return on_list(target, *args) if isinstance(target, list) else on_string(target, *args)

    return evaluate


def _sets(name: str, test: Callable[[list[Any], list[Any]], bool]) -> Callable[..., Any]:
    def evaluate(a: Any, b: Any) -> Any:
        if not isinstance(a, list) or not isinstance(b, list):
            return no_overload(f"sets.{name}({type_name(a)}, {type_name(b)})")
        return celtypes.BoolType(test(a, b))

    return evaluate


def _has_all(a: list[Any], b: list[Any]) -> bool:
    return all(any(equal(x, y) for y in a) for x in b)


LIST_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isSorted": _list_method("isSorted", _ordered),
    "sum": _list_method("sum", _sum),
    "min": _list_method("min", _extreme("min", pick_less=True)),
    "max": _list_method("max", _extreme("max", pick_less=False)),
    "indexOf": _on_list_or_string("indexOf", _index(last=False)),
    "lastIndexOf": _on_list_or_string("lastIndexOf", _index(last=True)),
    "sets.contains": _sets("contains", _has_all),
    "sets.equivalent": _sets("equivalent", lambda a, b: _has_all(a, b) and _has_all(b, a)),
    "sets.intersects": _sets("intersects", lambda a, b: any(equal(x, y) for x in a for y in b)),
}
