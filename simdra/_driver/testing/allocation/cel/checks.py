"""Compile-time checks that the Kubernetes CEL type checker would fail and celpy would not.

celpy parses and evaluates without declarations, so an unknown function, variable or
device field would only show up when evaluated, as a runtime error that `&&` / `||` may
absorb. Kubernetes refuses such a selector when it compiles it; so do these checks:
names resolve (`device`, macro and `cel.bind` variables, type names), functions and
methods are declared (CEL standard, strings extension, Kubernetes libraries, with their
argument counts), `device` has only its four fields, `has()` takes a field selection, a
regular expression written as a literal is valid RE2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, cast

import lark
from celpy.evaluation import celstr

from simdra._driver.testing.allocation.cel import comprehensions
from simdra._driver.testing.allocation.cel.regex import compile_regex

Node: TypeAlias = lark.Tree[Any]  # a celpy parse tree node
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
TYPE_NAMES = frozenset(
    {"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"}
)
# Global functions (name -> allowed argument counts).
FUNCTIONS: dict[str, tuple[int, ...]] = {
    "size": (1,), "int": (1,), "uint": (1,), "double": (1,), "string": (1,), "bytes": (1,),
    "bool": (1,), "type": (1,), "dyn": (1,), "timestamp": (1,), "duration": (1,),
    "matches": (2,), "has": (1,),
    "quantity": (1,), "isQuantity": (1,), "semver": (1, 2), "isSemver": (1, 2), "sign": (1,),
}  # fmt: skip
# Receiver-style functions (name -> allowed argument counts, receiver not counted).
METHODS: dict[str, tuple[int, ...]] = {
    "size": (0,), "contains": (1,), "startsWith": (1,), "endsWith": (1,), "matches": (1,),
    "getDate": (0, 1), "getDayOfMonth": (0, 1), "getDayOfWeek": (0, 1),
    "getDayOfYear": (0, 1), "getFullYear": (0, 1), "getMonth": (0, 1), "getHours": (0, 1),
    "getMilliseconds": (0, 1), "getMinutes": (0, 1), "getSeconds": (0, 1),
    "charAt": (1,), "indexOf": (1, 2), "lastIndexOf": (1, 2), "lowerAscii": (0,),
    "upperAscii": (0,), "replace": (2, 3), "split": (1, 2), "substring": (1, 2),
    "trim": (0,), "join": (0, 1), "find": (1,), "findAll": (1, 2), "includes": (1,),
    "compareTo": (1,), "isGreaterThan": (1,), "isLessThan": (1,),
    "isInteger": (0,), "asInteger": (0,), "asApproximateFloat": (0,), "add": (1,),
    "sub": (1,), "major": (0,), "minor": (0,), "patch": (0,),
    "isSorted": (0,), "sum": (0,), "min": (0,), "max": (0,),
    "slice": (2,), "flatten": (0, 1), "reverse": (0,), "distinct": (0,), "sort": (0,),
}  # fmt: skip
# Namespaced functions: `cel.bind(x, value, body)` and `sets.contains(a, b)`, ...
NAMESPACED: dict[str, tuple[int, ...]] = {
    "sets.contains": (2,), "sets.equivalent": (2,), "sets.intersects": (2,),
    "lists.range": (1,),
}  # fmt: skip
NAMESPACES = ("sets", "lists")
MACROS = frozenset(comprehensions.SHAPES)


class CheckError(Exception):
    """What is wrong, and the (line, column) where, for one compile error."""

    def __init__(self, message: str, where: Node | lark.Token) -> None:
        super().__init__(message)
        meta = where if isinstance(where, lark.Token) else where.meta
        self.column = getattr(meta, "column", None)


def check(tree: Node) -> None:
    """Raise CheckError for the first declaration problem in `tree`."""
    _check(tree, frozenset())


def token_at(tree: Node, index: int) -> lark.Token:
    """The token child at `index` (an IDENT, a literal's value)."""
    return cast(lark.Token, tree.children[index])


def check_without_list_attributes(tree: Node) -> None:
    """What the DRA environment refuses when DRAListTypeAttributes is off (1.36 default).

    Attribute values are then of type `any`, not `dyn`: a macro over one does not
    compile (`includes` is declared either way).
    """
    for node in tree.iter_subtrees():
        if node.data != "member_dot_arg":
            continue
        name, token = str(node.children[1]), token_at(node, 1)
        if name in MACROS and _is_attribute_value(node.children[0]):
            raise CheckError("expression of type 'any' cannot be range of a comprehension", token)


def _is_attribute_value(tree: Node) -> bool:
    """`device.attributes[domain].name` (or with [] / . in either place)."""
    value = _innermost(tree)
    if value.data not in ("member_dot", "member_index"):
        return False
    domain = _innermost(value.children[0])
    if domain.data not in ("member_dot", "member_index"):
        return False
    attributes = _innermost(domain.children[0])
    return (
        attributes.data == "member_dot"
        and str(attributes.children[1]) == "attributes"
        and plain_ident(attributes.children[0]) == "device"
    )


def plain_ident(tree: Node) -> str | None:
    """The identifier `tree` consists of (`x` in `all(x, ...)`), or None."""
    node = _innermost(tree)
    if node.data == "ident":
        return str(node.children[0])
    return None


def _innermost(tree: Node) -> Node:
    """Descend through wrappers with one child (expr -> ... -> primary) to the real node."""
    node = tree
    while len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
        node = node.children[0]
    return node


def _subtrees(tree: Node) -> Iterator[Node]:
    return (child for child in tree.children if isinstance(child, lark.Tree))


def _check(tree: Node, scope: frozenset[str]) -> None:
    handler = _HANDLERS.get(str(tree.data))
    if handler:
        handler(tree, scope)
        return
    for child in _subtrees(tree):
        _check(child, scope)


def _ident(tree: Node, scope: frozenset[str]) -> None:
    name = str(tree.children[0])
    if name not in scope and name != "device" and name not in TYPE_NAMES:
        raise CheckError(f"undeclared reference to '{name}'", tree.children[0])


def _is_root(tree: Node, name: str, scope: frozenset[str]) -> bool:
    return name not in scope and plain_ident(tree) == name


def _args(tree: Node, index: int) -> list[Node]:
    if len(tree.children) <= index or tree.children[index] is None:
        return []
    return list(_subtrees(tree.children[index]))


def _arity(
    kind: str, name: str, counts: tuple[int, ...] | None, args: list[Node], token: lark.Token
) -> None:
    if counts is None:
        raise CheckError(f"undeclared reference to {kind} '{name}'", token)
    if len(args) not in counts:
        raise CheckError(f"{kind} '{name}' takes {' or '.join(map(str, counts))} "
                         f"argument(s), got {len(args)}", token)  # fmt: skip


def _function_call(tree: Node, scope: frozenset[str]) -> None:
    token = token_at(tree, 0)
    name, args = str(token), _args(tree, 1)
    _arity("function", name, FUNCTIONS.get(name), args, token)
    if name == "has" and _innermost(args[0]).data != "member_dot":
        raise CheckError("invalid argument to has() macro: it takes a field selection", token)
    if name == "matches":
        _regex_literal(args[1], token)
    for arg in args:
        _check(arg, scope)


def _method_call(tree: Node, scope: frozenset[str]) -> None:
    target, token = tree.children[0], token_at(tree, 1)
    name, args = str(token), _args(tree, 2)
    if _is_root(target, "cel", scope):
        _bind(name, args, token, scope)
        return
    namespace = next((n for n in NAMESPACES if _is_root(target, n, scope)), None)
    if namespace:
        qualified = f"{namespace}.{name}"
        _arity("function", qualified, NAMESPACED.get(qualified), args, token)
        for arg in args:
            _check(arg, scope)
        return
    _check(target, scope)
    if name in MACROS:
        _macro(name, args, token, scope)
        return
    _arity("method", name, METHODS.get(name), args, token)
    if name in ("matches", "find", "findAll"):
        _regex_literal(args[0], token)
    for arg in args:
        _check(arg, scope)


def _regex_literal(tree: Node, token: lark.Token) -> None:
    node = _innermost(tree)
    if node.data != "literal" or token_at(node, 0).type not in ("STRING_LIT", "MLSTRING_LIT"):
        return
    compiled = compile_regex(str(celstr(token_at(node, 0))))
    if isinstance(compiled, str):
        raise CheckError(f"invalid regular expression: {compiled}", token)


def _macro(name: str, args: list[Node], token: lark.Token, scope: frozenset[str]) -> None:
    found = comprehensions.shape(name, len(args))
    variables = [plain_ident(arg) for arg in args[: found[0]]] if found else []
    if found is None or None in variables:
        forms = " or ".join(f"{v} variable name(s) and {e} expression(s)"
                            for v, e in comprehensions.SHAPES[name])  # fmt: skip
        raise CheckError(f"macro '{name}' takes {forms}", token)
    inner = scope | {str(v) for v in variables}
    for arg in args[found[0] :]:
        _check(arg, inner)


def _bind(name: str, args: list[Node], token: lark.Token, scope: frozenset[str]) -> None:
    variable = plain_ident(args[0]) if args else None
    if name != "bind":
        raise CheckError(f"undeclared reference to 'cel.{name}'", token)
    if len(args) != 3 or variable is None:
        raise CheckError("cel.bind takes a variable name, a value and an expression", token)
    _check(args[1], scope)
    _check(args[2], scope | {variable})


def _field(tree: Node, scope: frozenset[str]) -> None:
    target, token = tree.children
    if _is_root(target, "device", scope) and str(token) not in DEVICE_FIELDS:
        fields = ", ".join(sorted(DEVICE_FIELDS))
        raise CheckError(f"undefined field '{token}' (device has {fields})", token)
    for namespace in ("cel", *NAMESPACES):
        if _is_root(target, namespace, scope):
            raise CheckError(f"undeclared reference to '{namespace}.{token}'", token)
    _check(target, scope)


def _index(tree: Node, scope: frozenset[str]) -> None:
    if _is_root(tree.children[0], "device", scope):
        raise CheckError("device is an object: select a field (device.attributes)", tree)
    for child in _subtrees(tree):
        _check(child, scope)


def _unsupported(what: str) -> Callable[[Node, frozenset[str]], None]:
    def handler(tree: Node, scope: frozenset[str]) -> None:
        raise CheckError(f"{what} is not supported in a device selector", tree)

    return handler


_HANDLERS = {
    "ident": _ident,
    "ident_arg": _function_call,
    "member_dot_arg": _method_call,
    "member_dot": _field,
    "member_index": _index,
    "member_object": _unsupported("message construction"),
    "dot_ident": _unsupported("a leading '.' name"),
    "dot_ident_arg": _unsupported("a leading '.' function"),
}
