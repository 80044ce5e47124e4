"""CEL's macros over lists and maps, with one or two variables, as cel-go evaluates them.

Standard: `all`, `exists`, `exists_one`, `map` (with an optional filter), `filter`. The
two-variable forms the Kubernetes environment adds (cel-go's TwoVarComprehensions):
`all(i, v, p)`, `exists(i, v, p)`, `existsOne(i, v, p)`, `transformList(i, v, [f,] e)`,
`transformMap(k, v, [f,] e)`; over a list the first variable is the index, over a map
the key (one variable over a map: the key). `all` / `exists` combine their body's values
like `&&` / `||` (an error absorbed when another element decides); elsewhere an error in
the body is the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.testing.allocation.cel.operators import OPERATORS, no_overload
from simdra._driver.testing.allocation.cel.values import type_name

Body = Callable[[tuple[Any, ...]], Any]  # the values of the variables -> the body's value
# macro -> the (variables, expressions) shapes it takes
SHAPES: dict[str, tuple[tuple[int, int], ...]] = {
    "all": ((1, 1), (2, 1)),
    "exists": ((1, 1), (2, 1)),
    "exists_one": ((1, 1), (2, 1)),
    "existsOne": ((2, 1),),
    "map": ((1, 1), (1, 2)),
    "filter": ((1, 1),),
    "transformList": ((2, 1), (2, 2)),
    "transformMap": ((2, 1), (2, 2)),
}


def shape(name: str, arguments: int) -> tuple[int, int] | None:
    """(variables, expressions) of `name` called with `arguments` arguments, or None."""
    return next((s for s in SHAPES.get(name, ()) if sum(s) == arguments), None)


def entries(target: Any, variables: int) -> list[tuple[Any, ...]]:
    """What the variables take in turn: elements / keys, or (index, element) / (key, value)."""
    if isinstance(target, list):
        if variables == 1:
            return [(item,) for item in target]
        return [(celtypes.IntType(i), item) for i, item in enumerate(target)]
    if variables == 1:
        return [(key,) for key in target]
    return list(target.items())


def run(name: str, target: Any, variables: int, bodies: Sequence[Body]) -> Any:
    """The value of macro `name` over `target` (a list or map)."""
    if not isinstance(target, list | dict):
        return no_overload(f"{type_name(target)}.{name}()")
    items = entries(target, variables)
    if name in ("all", "exists"):
        return _quantify(name, items, bodies[0])
    if name in ("exists_one", "existsOne"):
        return _exactly_one(items, bodies[0])
    if name == "filter":
        return _collect(items, bodies[0], lambda item: item[0])
    keep, value = (bodies[0], bodies[1]) if len(bodies) == 2 else (None, bodies[0])
    if name == "transformMap":
        return _transform_map(items, keep, value)
    return _collect(items, keep, value)


def _quantify(name: str, items: list[tuple[Any, ...]], body: Body) -> Any:
    combine = OPERATORS["_&&_" if name == "all" else "_||_"]
    undecided = celtypes.BoolType(name == "all")
    result: Any = undecided
    for item in items:
        result = combine(result, body(item))
        if isinstance(result, celtypes.BoolType) and result != undecided:
            break  # decided: false for all, true for exists
    return result


def _exactly_one(items: list[tuple[Any, ...]], body: Body) -> Any:
    count = 0
    for item in items:
        value = _boolean(body(item))
        if isinstance(value, CELEvalError):
            return value
        count += bool(value)
    return celtypes.BoolType(count == 1)


def _boolean(value: Any) -> Any:
    if isinstance(value, celtypes.BoolType | CELEvalError):
        return value
    return no_overload(f"a macro's condition is {type_name(value)}, not bool")


def _collect(items: list[tuple[Any, ...]], keep: Body | None, value: Body) -> Any:
    """map / filter / transformList: the values for the items `keep` keeps."""
    result = celtypes.ListType()
    for _, produced in _kept_values(items, keep, value):
        if isinstance(produced, CELEvalError):
            return produced
        result.append(produced)
    return result


def _transform_map(items: list[tuple[Any, ...]], keep: Body | None, value: Body) -> Any:
    result = celtypes.MapType()
    for item, produced in _kept_values(items, keep, value):
        if isinstance(produced, CELEvalError):
            return produced
        result[item[0]] = produced
    return result


def _kept_values(items: list[tuple[Any, ...]], keep: Body | None,
                 value: Body) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(item, its value) for each item `keep` keeps, in order; the first error (of `keep`
    or of the value) comes as the value, and nothing after it."""
    for item in items:
        kept = _boolean(keep(item)) if keep else celtypes.BoolType(True)
        if isinstance(kept, CELEvalError):
            yield item, kept
            return
        if not kept:
            continue
        produced = value(item)
        yield item, produced
        if isinstance(produced, CELEvalError):
            return
