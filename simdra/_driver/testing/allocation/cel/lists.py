"""Lists and sets in the Kubernetes environment: its lists library, cel-go's lists and sets.

Kubernetes: `l.isSorted()`, `l.sum()`, `l.min()`, `l.max()`, `l.indexOf(x)`,
`l.lastIndexOf(x)` (`indexOf` / `lastIndexOf` on a string are the strings extension's).
cel-go lists (version 3): `l.slice(i, j)`, `l.flatten([depth])`, `l.reverse()`,
`l.distinct()`, `l.sort()`, `lists.range(n)` (not `sortBy`, `first`, `last`). Sets:
`sets.contains(a, b)` (every element of b is in a), `sets.equivalent(a, b)`,
`sets.intersects(a, b)`. Elements compare with CEL equality and ordering.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.testing.allocation.cel.operators import OPERATORS, equal, no_overload
from simdra._driver.testing.allocation.cel.strings import STRING_FUNCTIONS
from simdra._driver.testing.allocation.cel.values import type_name

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


def _slice(items: list[Any], start: Any, end: Any) -> Any:
    if not isinstance(start, int) or not isinstance(end, int):
        return no_overload(f"list.slice({type_name(start)}, {type_name(end)})")
    if start < 0 or end < 0:
        return CELEvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        return CELEvalError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if len(items) < end:
        return CELEvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return celtypes.ListType(items[start:end])


def _flatten(items: list[Any], depth: Any = 1) -> Any:
    if not isinstance(depth, int):
        return no_overload(f"list.flatten({type_name(depth)})")
    if depth < 0:
        return CELEvalError("level must be non-negative")
    flat = celtypes.ListType()
    for item in items:
        if isinstance(item, list) and depth > 0:
            flat.extend(_flatten(item, depth - 1))
        else:
            flat.append(item)
    return flat


def _distinct(items: list[Any]) -> Any:
    unique = celtypes.ListType()
    for item in items:
        if not any(equal(item, seen) for seen in unique):
            unique.append(item)
    return unique


def _sort(items: list[Any]) -> Any:
    kinds = {type_name(item) for item in items}
    if len(kinds) > 1 or not all(isinstance(item, int | float | str | bytes) for item in items):
        return no_overload(f"sort of a list of {', '.join(sorted(kinds))}")
    return celtypes.ListType(sorted(items))


def _range(count: Any) -> Any:
    if not isinstance(count, celtypes.IntType):
        return no_overload(f"lists.range({type_name(count)})")
    return celtypes.ListType(celtypes.IntType(i) for i in range(count))


LIST_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "slice": _list_method("slice", _slice),
    "flatten": _list_method("flatten", _flatten),
    "reverse": _list_method("reverse", lambda items: celtypes.ListType(reversed(items))),
    "distinct": _list_method("distinct", _distinct),
    "sort": _list_method("sort", _sort),
    "lists.range": _range,
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
