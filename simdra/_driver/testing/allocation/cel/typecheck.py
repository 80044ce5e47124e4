"""The part of cel-go's type checker that catches type errors a selector states outright.

Kubernetes compiles a selector with declared types: `device.driver` is a string,
`device.allowMultipleAllocations` a bool, `device.capacity[d][n]` a quantity, attribute
values are dyn (known only at run time). Where operand types are known this way
(literals, those fields, function results), an operator, function or method without an
overload for them (`device.driver == 1`, `"a" + 1`, `quantity("1") < quantity("2")`,
`s.startsWith(1)`, a selector of type int) is a compile error there, not a false at run
time, and so it is here (`check_types` raises CheckError). A type that has no overload at
all for an operator fails even against dyn (`attr < semver("1.0.0")`); anything else
involving dyn is left to run time, as in cel-go. Element types of list and map literals
are not tracked (`[1] == [1.0]` evaluates here; Kubernetes refuses it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lark

from simdra._driver.testing.allocation.cel import comprehensions
from simdra._driver.testing.allocation.cel.checks import CheckError, Node, plain_ident, token_at

Type = str | None  # a CEL type name, None for dyn / not known statically
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
NUMBERS = frozenset({"int", "uint", "double"})
ORDERED = frozenset({"string", "bytes", "bool", "google.protobuf.Timestamp",
                     "google.protobuf.Duration"})  # fmt: skip
_LITERALS = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
             "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "BOOL_LIT": "bool"}  # fmt: skip
_DEVICE = {"driver": "string", "allowMultipleAllocations": "bool",
           "attributes": "map(string, map(string, dyn))",
           "capacity": "map(string, map(string, kubernetes.Quantity))"}  # fmt: skip
_FUNCTION_RESULTS: dict[str, Type] = {
    "quantity": QUANTITY, "semver": SEMVER, "isQuantity": "bool", "isSemver": "bool",
    "size": "int", "int": "int", "uint": "uint", "double": "double", "string": "string",
    "bytes": "bytes", "bool": "bool", "matches": "bool", "has": "bool",
    "timestamp": "google.protobuf.Timestamp", "duration": "google.protobuf.Duration",
    "sign": "int",
}  # fmt: skip
_S, _I, _B = frozenset({"string"}), frozenset({"int"}), frozenset({"bool"})
_STRING_RESULTS = ("charAt", "lowerAscii", "upperAscii", "replace", "substring", "trim", "find")
# method -> (receiver types it has overloads for, result type)
_METHODS: dict[str, tuple[frozenset[str] | None, Type]] = {
    "compareTo": (frozenset({QUANTITY, SEMVER}), "int"),
    "isGreaterThan": (frozenset({QUANTITY, SEMVER}), "bool"),
    "isLessThan": (frozenset({QUANTITY, SEMVER}), "bool"),
    "asInteger": (frozenset({QUANTITY}), "int"),
    "isInteger": (frozenset({QUANTITY}), "bool"),
    "asApproximateFloat": (frozenset({QUANTITY}), "double"),
    **{m: (frozenset({QUANTITY}), QUANTITY) for m in ("add", "sub")},
    **{m: (frozenset({SEMVER}), "int") for m in ("major", "minor", "patch")},
    **{m: (_S, "bool") for m in ("startsWith", "endsWith", "contains", "matches")},
    **{m: (_S, "string") for m in _STRING_RESULTS},
    **{m: (frozenset({"string", "list"}), "int") for m in ("indexOf", "lastIndexOf")},
    "isSorted": (frozenset({"list"}), "bool"),
    **{
        m: (frozenset({"list"}), "list")
        for m in ("slice", "flatten", "reverse", "distinct", "sort")
    },
    **{m: (frozenset({"list"}), None) for m in ("sum", "min", "max")},
    **{m: (_S, "list") for m in ("split", "findAll")},
    "join": (frozenset({"list"}), "string"),
    "size": (frozenset({"string", "bytes", "list", "map"}), "int"),
    **{m: (None, "bool") for m in ("all", "exists", "exists_one", "existsOne", "includes")},
    **{m: (None, "list") for m in ("map", "filter", "transformList")},
    "transformMap": (None, "map"),
}


_SIZED = frozenset({"string", "bytes", "list", "map"})
# Argument types the overloads take, by position (None: any); the receiver is not listed.
_ARGUMENTS: dict[str, tuple[frozenset[str] | None, ...]] = {
    **{m: (_S,) for m in ("startsWith", "endsWith", "contains", "matches", "find", "join")},
    "findAll": (_S, _I), "charAt": (_I,), "indexOf": (None, _I), "lastIndexOf": (None, _I),
    "replace": (_S, _S, _I), "split": (_S, _I), "substring": (_I, _I),
    **{m: (frozenset({QUANTITY, SEMVER}),) for m in ("compareTo", "isGreaterThan", "isLessThan")},
    **{m: (frozenset({QUANTITY, "int"}),) for m in ("add", "sub")},
}  # fmt: skip
_FUNCTION_ARGUMENTS: dict[str, tuple[frozenset[str] | None, ...]] = {
    "quantity": (_S,), "isQuantity": (_S,), "semver": (_S, _B), "isSemver": (_S, _B),
    "sign": (frozenset({QUANTITY}),), "size": (_SIZED,), "matches": (_S, _S),
}  # fmt: skip


def check_types(tree: Node) -> None:
    """Raise CheckError when `tree` has a type error cel-go reports at compile time."""
    result = _type(tree)
    if result is not None and result != "bool":
        raise CheckError(f"must evaluate to bool or the unknown type, not {result}", tree)


def _type(tree: Node) -> Type:
    rule = _RULES.get(str(tree.data))
    if rule is not None:
        return rule(tree)
    subtrees = [c for c in tree.children if isinstance(c, lark.Tree)]
    for child in subtrees:
        _type(child)
    return _type(subtrees[0]) if len(tree.children) == 1 and subtrees else None


def _mismatch(tree: Node, operator: str, *types: Type) -> CheckError:
    applied = ", ".join(t or "dyn" for t in types)
    return CheckError(f"found no matching overload for '{operator}' applied to '({applied})'", tree)


def _kind(value: Type) -> Type:
    """map(string, X) and a map literal are both maps when comparing kinds."""
    return "map" if value and value.startswith("map") else value


def _literal(tree: Node) -> Type:
    return _LITERALS.get(str(token_at(tree, 0).type))


def _relation(tree: Node) -> Type:
    if len(tree.children) == 1:
        return _type(tree.children[0])
    operator_tree, right_tree = tree.children
    left, right = _type(operator_tree.children[0]), _type(right_tree)
    operator = str(operator_tree.data).removeprefix("relation_")
    left, right = _kind(left), _kind(right)
    symbol = _SYMBOLS[operator]
    known = {t for t in (left, right) if t is not None}
    ordering = operator in ("lt", "le", "gt", "ge")
    # A type with no overload at all for the operator fails even against dyn.
    if ordering and not known <= NUMBERS | ORDERED:
        raise _mismatch(tree, symbol, left, right)
    if operator == "in" and right is not None and right not in ("list", "map"):
        raise _mismatch(tree, symbol, left, right)
    if left is None or right is None:
        return "bool"
    if operator in ("eq", "ne") and left != right:
        raise _mismatch(tree, symbol, left, right)
    if ordering and not (known <= NUMBERS or left == right):
        raise _mismatch(tree, symbol, left, right)
    return "bool"


_SYMBOLS = {"eq": "_==_", "ne": "_!=_", "lt": "_<_", "le": "_<=_", "gt": "_>_", "ge": "_>=_",
            "in": "@in"}  # fmt: skip


def _arithmetic(tree: Node) -> Type:
    if len(tree.children) == 1:
        return _type(tree.children[0])
    operator_tree, right_tree = tree.children
    left, right = _type(operator_tree.children[0]), _type(right_tree)
    symbol = str(operator_tree.data).split("_")[1]
    name = f"_{_ARITHMETIC[symbol]}_"
    if any(t is not None and _kind(t) not in _OPERANDS[symbol] for t in (left, right)):
        raise _mismatch(tree, name, left, right)  # no overload takes that type
    if left is None or right is None or {left, right} & _TIMES:
        return None  # dyn, or time arithmetic (timestamp + duration, ...): run time decides
    if left != right:
        raise _mismatch(tree, name, left, right)
    return left


_ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}
_TIMES = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})
_OPERANDS = {
    "add": NUMBERS | _TIMES | {"string", "bytes", "list"},
    "sub": NUMBERS | _TIMES,
    "mul": NUMBERS,
    "div": NUMBERS,
    "mod": frozenset({"int", "uint"}),
}


def _logical(name: str) -> Callable[[Node], Type]:
    def rule(tree: Node) -> Type:
        if len(tree.children) == 1:
            return _type(tree.children[0])
        types = [_type(child) for child in tree.children]
        if any(t not in (None, "bool") for t in types):
            raise _mismatch(tree, name, *types)
        return "bool"

    return rule


def _unary(tree: Node) -> Type:
    if len(tree.children) == 1:
        return _type(tree.children[0])
    operator, operand = tree.children
    value = _type(operand)
    if str(operator.data) == "unary_not":
        if value not in (None, "bool"):
            raise _mismatch(tree, "!_", value)
        return "bool"
    if value is not None and value not in ("int", "double"):
        raise _mismatch(tree, "-_", value)
    return value


def _conditional(tree: Node) -> Type:
    if len(tree.children) == 1:
        return _type(tree.children[0])
    condition, yes, no = (_type(child) for child in tree.children)
    if condition not in (None, "bool") or (yes and no and _kind(yes) != _kind(no)):
        raise _mismatch(tree, "_?_:_", condition, yes, no)
    return yes if yes == no else None


def _field(tree: Node) -> Type:
    target, name = tree.children
    if plain_ident(target) == "device":
        return _DEVICE.get(str(name))
    return _element(_type(target))


def _index(tree: Node) -> Type:
    target, key = tree.children
    container, key_type = _type(target), _type(key)
    if container and container.startswith("map(string, ") and key_type not in (None, "string"):
        raise _mismatch(tree, "_[_]", container, key_type)
    return _element(container)


def _element(container: Type) -> Type:
    # map(string, X) -> X, written out for the two device maps only.
    if container and container.startswith("map(string, ") and container.endswith(")"):
        inner = container[len("map(string, ") : -1]
        return None if inner == "dyn" else inner
    return None


def _function(tree: Node) -> Type:
    name, args = str(tree.children[0]), _arguments(tree, 1)
    types = [_type(arg) for arg in args]
    kinds = [_kind(t) for t in types]
    _check_arguments(tree, name, _FUNCTION_ARGUMENTS.get(name, ()), kinds, shown=kinds)
    return _FUNCTION_RESULTS.get(name)


def _method(tree: Node) -> Type:
    target, name = tree.children[0], str(tree.children[1])
    args = _arguments(tree, 2)
    if plain_ident(target) == "cel" and name == "bind":
        _type(args[1])
        return _type(args[2])
    if plain_ident(target) in ("sets", "lists"):
        for arg in args:
            _type(arg)
        return "list" if name == "range" else "bool"
    receiver = _kind(_type(target))
    found = comprehensions.shape(name, len(args))
    if found is not None:
        for body in args[found[0] :]:
            _type(body)  # the bound variables are dyn
    else:
        _check_receiver(tree, name, receiver, [_kind(_type(arg)) for arg in args])
    return _METHODS.get(name, (None, None))[1]


def _check_receiver(tree: Node, name: str, receiver: Type, args: list[Type]) -> None:
    receivers = _METHODS.get(name, (None, None))[0]
    if receiver is not None and receivers is not None and receiver not in receivers:
        raise _mismatch(tree, name, receiver, *args)
    same_kind = ("compareTo", "isGreaterThan", "isLessThan")
    if name in same_kind and receiver and args and args[0] and args[0] != receiver:
        raise _mismatch(tree, name, receiver, *args)
    _check_arguments(tree, name, _ARGUMENTS.get(name, ()), args, shown=[receiver, *args])


def _check_arguments(
    tree: Node, name: str, allowed: tuple[Any, ...], args: list[Type], shown: list[Type]
) -> None:
    """Raise for an argument of a type that no overload of `name` takes."""
    for kinds, value in zip(allowed, args, strict=False):
        if kinds is not None and value is not None and value not in kinds:
            raise _mismatch(tree, name, *shown)


def _collection(kind: str) -> Callable[[Node], Type]:
    """A list or map literal; its elements (keys, values) are of one type when known."""

    def rule(tree: Node) -> Type:
        inits = tree.children[0] if tree.children else None
        items = [c for c in inits.children if isinstance(c, lark.Tree)] if inits else []
        types = [_kind(_type(item)) for item in items]
        groups = [types] if kind == "list" else [types[0::2], types[1::2]]
        for group in groups:
            known = [t for t in group if t is not None]
            if any(t != known[0] for t in known):
                mismatch = next(t for t in known if t != known[0])
                raise CheckError(f"expected type '{known[0]}' but found '{mismatch}' "
                                 f"in a {kind} literal", tree)  # fmt: skip
        return kind

    return rule


def _arguments(tree: Node, index: int) -> list[Node]:
    exprlist = tree.children[index] if len(tree.children) > index else None
    if exprlist is None:
        return []
    return [c for c in exprlist.children if isinstance(c, lark.Tree)]


_RULES: dict[str, Callable[[Node], Type]] = {
    "literal": _literal,
    "relation": _relation,
    "addition": _arithmetic,
    "multiplication": _arithmetic,
    "conditionaland": _logical("_&&_"),
    "conditionalor": _logical("_||_"),
    "unary": _unary,
    "expr": _conditional,
    "member_dot": _field,
    "member_index": _index,
    "ident_arg": _function,
    "member_dot_arg": _method,
    "list_lit": _collection("list"),
    "map_lit": _collection("map"),
    "ident": lambda tree: None,
}
