"""The typing rules of the DRA CEL environment that the stand-in's selector check
(`celtypes`) applies: the types it knows, what the `device` variable, functions and
methods take and give, and which operators fit which types. Every rule raises
TypeCheckError with the API server's wording."""

from __future__ import annotations

# Types are plain names. Maps of the device: ATTRS = device.attributes (domain -> name ->
# value), DOMAIN = one domain's attributes, CAPS / CAPDOMAIN the same for capacity.
BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL = (
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "null",
)
LIST, MAP, QUANTITY, SEMVER, DYN, DEVICE = "list", "map", "quantity", "semver", "dyn", "device"
# An attribute's value: like dyn for operators, but not a list or map to iterate over.
ANY = "google.protobuf.Any"
ATTRS = "map(string, map(string, google.protobuf.Any))"
DOMAIN = "map(string, google.protobuf.Any)"
CAPS = "map(string, map(string, quantity))"
CAPDOMAIN = "map(string, quantity)"

DEVICE_FIELDS = {
    "driver": STRING,
    "attributes": ATTRS,
    "capacity": CAPS,
    "allowMultipleAllocations": BOOL,
}
# With DRAListTypeAttributes (on in the modelled 1.37, as the e2e runs it) an attribute is
# dyn, so that a list attribute can be iterated (`.exists(i, ...)`); without it, Any.
LIST_TYPE_ATTRIBUTES = True
ATTRIBUTE = DYN if LIST_TYPE_ATTRIBUTES else ANY
MAP_VALUE = {ATTRS: DOMAIN, DOMAIN: ATTRIBUTE, CAPS: CAPDOMAIN, CAPDOMAIN: QUANTITY, MAP: DYN}
NUMERIC = {INT, UINT, DOUBLE}
# Types that can only be compared with their own kind (numbers compare across kinds).
GROUP = {INT: "number", UINT: "number", DOUBLE: "number"}
FUNCTIONS = {
    "quantity": QUANTITY,
    "semver": SEMVER,
    "isQuantity": BOOL,
    "isSemver": BOOL,
    "has": BOOL,
    "size": INT,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bool": BOOL,
    "bytes": BYTES,
    "matches": BOOL,
}
# Argument types of functions and methods that have only these overloads.
FUNCTION_ARGS = {"quantity": STRING, "semver": STRING, "isQuantity": STRING, "isSemver": STRING}
STRING_ARGS = {"startsWith", "endsWith", "matches"}  # on a string, or on a dyn value
METHOD_ARGS = {
    QUANTITY: {"isGreaterThan": QUANTITY, "isLessThan": QUANTITY, "compareTo": QUANTITY},
    SEMVER: {"isGreaterThan": SEMVER, "isLessThan": SEMVER, "compareTo": SEMVER},
    STRING: {name: STRING for name in (*STRING_ARGS, "contains")},
}
METHODS = {
    STRING: {
        "startsWith": BOOL,
        "endsWith": BOOL,
        "contains": BOOL,
        "matches": BOOL,
        "size": INT,
        "lowerAscii": STRING,
        "upperAscii": STRING,
        "trim": STRING,
        "replace": STRING,
        "substring": STRING,
        "charAt": STRING,
        "indexOf": INT,
        "lastIndexOf": INT,
        "split": LIST,
    },
    QUANTITY: {
        "isGreaterThan": BOOL,
        "isLessThan": BOOL,
        "isInteger": BOOL,
        "compareTo": INT,
        "sign": INT,
        "asInteger": INT,
        "asApproximateFloat": DOUBLE,
        "add": QUANTITY,
        "sub": QUANTITY,
    },
    SEMVER: {
        "isGreaterThan": BOOL,
        "isLessThan": BOOL,
        "compareTo": INT,
        "major": INT,
        "minor": INT,
        "patch": INT,
    },
}
# Function libraries called as `<namespace>.<function>(...)`.
NAMESPACES = {"cel", "math", "strings", "sets", "lists", "base64", "optional"}
ORDERED = {INT, UINT, DOUBLE, STRING, BYTES, BOOL}
MACROS = {"exists": BOOL, "all": BOOL, "exists_one": BOOL, "map": LIST, "filter": LIST}


class TypeCheckError(ValueError):
    """The expression surely fails the API server's CEL type check; `pos` is the offset
    of the token the server points at."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def known(t: str) -> bool:
    return t not in (DYN, ANY)


def method_arg(target: str, method: str) -> str | None:
    """The one argument type `target.method(...)` takes, None when not known here."""
    if target in (DYN, ANY):
        return STRING if method in STRING_ARGS else None
    return METHOD_ARGS.get(target, {}).get(method)


def check_arguments(
    function: str, args: list[str], wanted: str | None, pos: int, receiver: str = ""
) -> None:
    if wanted is not None and len(args) == 1 and known(args[0]) and args[0] != wanted:
        raise overload(function, args, pos, receiver)


# How the server's messages name some types.
SHOWN = {QUANTITY: "kubernetes.Quantity", SEMVER: "kubernetes.Semver", ANY: "any"}


def shown_type(kind: str) -> str:
    return SHOWN.get(kind, kind)


def overload(op: str, types: list[str], pos: int, receiver: str = "") -> TypeCheckError:
    shown = ", ".join(shown_type(t) for t in types)
    on = f"{shown_type(receiver)}." if receiver else ""
    return TypeCheckError(f"found no matching overload for '{op}' applied to '{on}({shown})'", pos)


def need(actual: str, wanted: str, op: str, pos: int) -> None:
    if known(actual) and actual != wanted:
        raise overload(op, [actual], pos)


def expect_bool(kind: str, pos: int) -> None:
    """An operand of `&&` or `||`: a bool, or not known before run time."""
    if known(kind) and kind != BOOL:
        raise TypeCheckError(f"expected type 'bool' but found '{shown_type(kind)}'", pos)


def relate(op: str, left: str, right: str, pos: int) -> str:
    name = "@in" if op == "in" else f"_{op}_"
    if op == "in":
        if known(right) and right != LIST and right not in MAP_VALUE:
            raise overload(name, [left, right], pos)
        return BOOL
    if NULL in (left, right) or not (known(left) and known(right)):
        return BOOL
    kinds = {t if t not in MAP_VALUE else MAP for t in (left, right)}
    if op in ("==", "!="):
        # No equality across types, not even int with double (a real server refuses
        # `1 == 1.0`); maps of any kind compare with maps.
        mismatch = len(kinds) > 1
    else:
        # Ordering: numbers across kinds, otherwise the same orderable type.
        mismatch = len({GROUP.get(t, t) for t in kinds}) > 1 or not kinds <= ORDERED
    if mismatch:
        raise overload(name, [left, right], pos)
    return BOOL


def arith(op: str, left: str, right: str, pos: int) -> str:
    if not (known(left) and known(right)):
        return DYN
    allowed = {"+": {INT, UINT, DOUBLE, STRING, BYTES, LIST}}.get(op, NUMERIC)
    if left != right or left not in allowed:
        raise overload(f"_{op}_", [left, right], pos)
    return left


def select(target: str, name: str, dot: int) -> str:
    if target == DEVICE:
        if name not in DEVICE_FIELDS:
            raise TypeCheckError(f"undefined field '{name}'", dot)
        return DEVICE_FIELDS[name]
    if target in MAP_VALUE:
        return MAP_VALUE[target]
    if target in (BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL, LIST, QUANTITY, SEMVER):
        raise TypeCheckError(f"type '{shown_type(target)}' does not support field selection", dot)
    return DYN


def shown(kind: str) -> str:
    """A type as the server's messages name it (`kubernetes.Quantity` for a quantity)."""
    return shown_type(kind)


