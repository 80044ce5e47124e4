"""A small, safe evaluator for the CEL subset that DeviceClass and request selectors use.

Supported (what examples and driver docs actually write):

* `device.driver`, `device.allowMultipleAllocations`
* `device.attributes["domain"].name` / `["name"]` (int, bool, string, version, lists)
* `device.capacity["domain"].name` as a quantity
* `quantity("1Gi")` and `semver("1.2.3")` with `.compareTo(x)`, `.isGreaterThan(x)`,
  `.isLessThan(x)`; quantities also `.asInteger()`, `.isInteger()`, `.sign()`;
  versions `.major()`, `.minor()`, `.patch()`; strings `.startsWith()`, `.endsWith()`,
  `.contains()`
* `==`, `!=`, `<`, `<=`, `>`, `>=`, `in`, `&&`, `||`, `!`, unary `-`, parentheses,
  `'single'` / `"double"` quoted strings, integers, `true`, `false`

Semantics follow the Kubernetes DRA CEL environment: an unqualified attribute or
capacity name belongs to the device's driver domain; an unknown domain is an empty map;
a missing name in a domain is a runtime "no such key" error, which `&&` / `||` absorb
when the other side decides the result (CEL's commutative logic). Anything outside the
subset raises `UnsupportedExpression` at compile time: never silently true.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from driver.devices.quantity import QuantityError, format_quantity, parse_quantity
from driver.testing.allocation.errors import AllocationError

DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")
FUNCTIONS = ("quantity", "semver")
METHODS = {
    "compareTo": 1,
    "isGreaterThan": 1,
    "isLessThan": 1,
    "asInteger": 0,
    "isInteger": 0,
    "sign": 0,
    "major": 0,
    "minor": 0,
    "patch": 0,
    "startsWith": 1,
    "endsWith": 1,
    "contains": 1,
}


class UnsupportedExpression(AllocationError, ValueError):
    """A selector uses CEL outside the subset this allocator understands."""


class SelectorError(AllocationError):
    """A selector failed at run time (missing attribute, type mismatch), as CEL would."""


# ---------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Quantity:
    """A CEL Kubernetes quantity (exact)."""

    value: Fraction

    def __str__(self) -> str:
        try:
            return format_quantity(self.value)
        except QuantityError:
            return str(self.value)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$"
)


@dataclass(frozen=True)
class Version:
    """A semantic version (2.0.0); ordered by semver precedence, build metadata ignored."""

    text: str

    @functools.cached_property
    def key(self) -> tuple[Any, ...]:
        match = _SEMVER.match(self.text)
        if not match:
            raise SelectorError(f"{self.text!r} is not a semantic version")
        major, minor, patch, pre = match.groups()
        core = (int(major), int(minor), int(patch))
        if pre is None:
            return (*core, 1, ())
        parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
        return (*core, 0, parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text


class _Map:
    """A CEL map: string keys; a missing key is a run-time error."""

    def __init__(self, entries: Mapping[str, Any], label: str) -> None:
        self.entries = entries
        self.label = label

    def get(self, key: Any) -> Any:
        if not isinstance(key, str):
            raise SelectorError(f"{self.label} keys are strings, got {_type(key)}")
        if key not in self.entries:
            raise SelectorError(f"no such key: {key} (in {self.label})")
        return self.entries[key]


class _DomainMap(_Map):
    """`device.attributes` / `device.capacity`: an unknown domain is an empty map."""

    def get(self, key: Any) -> Any:
        if not isinstance(key, str):
            raise SelectorError(f"{self.label} keys are strings, got {_type(key)}")
        return _Map(self.entries.get(key, {}), f'{self.label}["{key}"]')


@dataclass(frozen=True)
class DeviceView:
    """What a selector sees of one device: the input of the CEL `device` variable."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    allow_multiple_allocations: bool = False

    @classmethod
    def of(cls, driver: str, device: Mapping[str, Any]) -> DeviceView:
        """The view of `device` (a ResourceSlice `spec.devices[]` entry) of `driver`."""
        attributes: dict[str, dict[str, Any]] = {}
        for name, entry in (device.get("attributes") or {}).items():
            domain, ident = split_qualified_name(name, driver)
            attributes.setdefault(domain, {})[ident] = _attribute_value(entry)
        capacity: dict[str, dict[str, Quantity]] = {}
        for name, entry in (device.get("capacity") or {}).items():
            domain, ident = split_qualified_name(name, driver)
            capacity.setdefault(domain, {})[ident] = Quantity(parse_quantity(entry["value"]))
        return cls(driver, attributes, capacity, bool(device.get("allowMultipleAllocations")))


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, identifier) of an attribute or capacity name; unqualified -> driver domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(entry: Mapping[str, Any]) -> Any:
    for kind, convert in (("int", int), ("bool", bool), ("string", str), ("version", Version)):
        if kind in entry:
            return convert(entry[kind])
        if kind + "s" in entry:
            return [convert(v) for v in entry[kind + "s"]]
    raise SelectorError(f"attribute value {dict(entry)!r} has no known type")


# ---------------------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<int>\d+)(?![\w.])
      | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\].,-])
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True)
class _Token:
    kind: str  # string, int, ident, op, end
    text: str
    pos: int


def _tokenize(expression: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(expression):
        if expression[pos:].strip() == "":
            break
        match = _TOKEN.match(expression, pos)
        if not match:
            start = len(expression) - len(expression[pos:].lstrip())
            raise _unsupported(expression, start, "unsupported syntax")
        kind = match.lastgroup or "op"
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    tokens.append(_Token("end", "", len(expression)))
    return tokens


def _unsupported(expression: str, pos: int, what: str) -> UnsupportedExpression:
    snippet = expression[pos : pos + 20] or "end of expression"
    return UnsupportedExpression(
        f"CEL selector `{expression}`: {what} at position {pos} (`{snippet}`); "
        "the test allocator supports only a subset of CEL (see driver.testing.allocation.cel)"
    )


def _unquote(text: str, expression: str, pos: int) -> str:
    out: list[str] = []
    body = iter(text[1:-1])
    for ch in body:
        if ch != "\\":
            out.append(ch)
            continue
        escaped = next(body, "")
        if escaped not in _ESCAPES:
            raise _unsupported(expression, pos, f"unsupported string escape \\{escaped}")
        out.append(_ESCAPES[escaped])
    return "".join(out)


# ---------------------------------------------------------------------------- parser

Node = Callable[[DeviceView], Any]


class _Parser:
    """Recursive descent over the token list, producing closures `view -> value`."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokenize(expression)
        self.index = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def take(self, text: str | None = None, kind: str | None = None) -> _Token | None:
        token = self.token
        if (text is not None and token.text != text) or (kind is not None and token.kind != kind):
            return None
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        if not self.take(text):
            raise _unsupported(self.expression, self.token.pos, f"expected {text!r}")

    def parse(self) -> Node:
        node = self.or_expr()
        if self.token.kind != "end":
            raise _unsupported(self.expression, self.token.pos, "unsupported syntax")
        return node

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.take("||"):
            node = _logical(node, self.and_expr(), decisive=True)
        return node

    def and_expr(self) -> Node:
        node = self.relation()
        while self.take("&&"):
            node = _logical(node, self.relation(), decisive=False)
        return node

    def relation(self) -> Node:
        left = self.unary()
        for op in ("==", "!=", "<=", ">=", "<", ">", "in"):
            token = self.token
            if token.text == op and token.kind in ("op", "ident"):
                self.index += 1
                return _compare(op, left, self.unary())
        return left

    def unary(self) -> Node:
        if self.take("!"):
            operand = self.unary()
            return lambda view: not _bool(operand(view), "operand of '!'")
        if self.take("-"):
            token = self.take(kind="int")
            if not token:
                raise _unsupported(self.expression, self.token.pos, "'-' only before integers")
            value = -int(token.text)
            return lambda view: value
        return self.postfix()

    def postfix(self) -> Node:
        node, is_device = self.primary()
        while True:
            if self.take("."):
                name = self.take(kind="ident")
                if not name:
                    raise _unsupported(self.expression, self.token.pos, "expected a field name")
                if self.token.text == "(":
                    node = self.method(node, name)
                elif is_device:
                    node = self.device_field(name)
                else:
                    node = _member(node, name.text)
            elif self.take("["):
                key = self.or_expr()
                self.expect("]")
                node = _index(node, key)
            else:
                return node
            is_device = False

    def device_field(self, name: _Token) -> Node:
        if name.text not in DEVICE_FIELDS:
            raise _unsupported(self.expression, name.pos, f"unknown device field {name.text!r}")
        return _DEVICE_FIELD[name.text]

    def method(self, target: Node, name: _Token) -> Node:
        if name.text not in METHODS:
            raise _unsupported(self.expression, name.pos, f"unsupported method {name.text!r}")
        args = self.arguments()
        if len(args) != METHODS[name.text]:
            raise _unsupported(self.expression, name.pos, f"wrong argument count for {name.text}")
        return _method(name.text, target, args)

    def arguments(self) -> list[Node]:
        self.expect("(")
        args: list[Node] = []
        if not self.take(")"):
            args.append(self.or_expr())
            while self.take(","):
                args.append(self.or_expr())
            self.expect(")")
        return args

    def primary(self) -> tuple[Node, bool]:
        token = self.token
        if token.kind == "string":
            self.index += 1
            text = _unquote(token.text, self.expression, token.pos)
            return (lambda view: text), False
        if token.kind == "int":
            self.index += 1
            number = int(token.text)
            return (lambda view: number), False
        if self.take("("):
            node = self.or_expr()
            self.expect(")")
            return node, False
        if token.kind == "ident":
            return self.identifier(token), token.text == "device"
        raise _unsupported(self.expression, token.pos, "unsupported syntax")

    def identifier(self, token: _Token) -> Node:
        self.index += 1
        if token.text in ("true", "false"):
            flag = token.text == "true"
            return lambda view: flag
        if token.text == "device":
            return lambda view: view
        if token.text in FUNCTIONS and self.token.text == "(":
            args = self.arguments()
            if len(args) != 1:
                raise _unsupported(self.expression, token.pos, f"{token.text}() takes 1 argument")
            return _function(token.text, args[0])
        raise _unsupported(self.expression, token.pos, f"unknown name {token.text!r}")


_DEVICE_FIELD: dict[str, Node] = {
    "driver": lambda view: view.driver,
    "attributes": lambda view: _DomainMap(view.attributes, "device.attributes"),
    "capacity": lambda view: _DomainMap(view.capacity, "device.capacity"),
    "allowMultipleAllocations": lambda view: view.allow_multiple_allocations,
}


# ---------------------------------------------------------------------------- evaluation


def _type(value: Any) -> str:
    names = {bool: "bool", int: "int", str: "string", Quantity: "quantity", Version: "semver"}
    return names.get(type(value), "list" if isinstance(value, list) else "map")


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise SelectorError(f"{what} must be a bool, got {_type(value)}")
    return value


def _logical(left: Node, right: Node, *, decisive: bool) -> Node:
    """`&&` (decisive=False) or `||` (decisive=True) with CEL's error absorption."""

    def evaluate(view: DeviceView) -> bool:
        try:
            first = _bool(left(view), "operand of a logical operator")
        except SelectorError as error:
            if _bool(right(view), "operand of a logical operator") is decisive:
                return decisive
            raise error
        if first is decisive:
            return decisive
        return _bool(right(view), "operand of a logical operator")

    return evaluate


def _member(target: Node, name: str) -> Node:
    def evaluate(view: DeviceView) -> Any:
        value = target(view)
        if not isinstance(value, _Map):
            raise SelectorError(f"cannot select field {name!r} of a {_type(value)}")
        return value.get(name)

    return evaluate


def _index(target: Node, key: Node) -> Node:
    def evaluate(view: DeviceView) -> Any:
        value = target(view)
        if not isinstance(value, _Map):
            raise SelectorError(f"cannot index a {_type(value)}")
        return value.get(key(view))

    return evaluate


def _compare(op: str, left: Node, right: Node) -> Node:
    def evaluate(view: DeviceView) -> bool:
        a, b = left(view), right(view)
        if op == "in":
            return _contains(b, a)
        if op in ("==", "!="):
            # CEL heterogeneous equality: values of different types are never equal.
            equal = type(a) is type(b) and a == b
            return equal if op == "==" else not equal
        if type(a) is not type(b) or type(a) not in (int, str):
            raise SelectorError(f"no such overload: {_type(a)} {op} {_type(b)}")
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

    return evaluate


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, _Map):
        return isinstance(item, str) and item in container.entries
    if isinstance(container, list):
        return any(type(item) is type(v) and item == v for v in container)
    raise SelectorError(f"no such overload: {_type(item)} in {_type(container)}")


def _function(name: str, arg: Node) -> Node:
    def evaluate(view: DeviceView) -> Any:
        text = arg(view)
        if not isinstance(text, str):
            raise SelectorError(f"{name}() takes a string, got {_type(text)}")
        if name == "quantity":
            try:
                return Quantity(parse_quantity(text))
            except QuantityError as error:
                raise SelectorError(f"quantity({text!r}): {error}") from None
        version = Version(text)
        _ = version.key  # validate now, so a bad literal fails where it is written
        return version

    return evaluate


def _method(name: str, target: Node, args: list[Node]) -> Node:
    def evaluate(view: DeviceView) -> Any:
        value = target(view)
        values = [arg(view) for arg in args]
        return _call(name, value, values)

    return evaluate


_ORDERING = ("compareTo", "isGreaterThan", "isLessThan")


def _call(name: str, value: Any, args: list[Any]) -> Any:
    if isinstance(value, Quantity | Version) and name in _ORDERING:
        other = args[0]
        if type(other) is not type(value):
            raise SelectorError(f"no such overload: {_type(value)}.{name}({_type(other)})")
        a, b = (value.value, other.value) if isinstance(value, Quantity) else (value.key, other.key)
        order = (a > b) - (a < b)
        return {"compareTo": order, "isGreaterThan": order > 0, "isLessThan": order < 0}[name]
    if isinstance(value, Quantity) and name in ("asInteger", "isInteger", "sign"):
        if name == "sign":
            return (value.value > 0) - (value.value < 0)
        if name == "isInteger":
            return value.value.denominator == 1
        if value.value.denominator != 1:
            raise SelectorError(f"quantity {value} is not an integer")
        return value.value.numerator
    if isinstance(value, Version) and name in ("major", "minor", "patch"):
        return value.key[("major", "minor", "patch").index(name)]
    if isinstance(value, str) and name in ("startsWith", "endsWith", "contains"):
        other = args[0]
        if not isinstance(other, str):
            raise SelectorError(f"no such overload: string.{name}({_type(other)})")
        test = {"startsWith": value.startswith, "endsWith": value.endswith}.get(name)
        return test(other) if test else other in value
    raise SelectorError(f"no such overload: {_type(value)}.{name}()")


# ---------------------------------------------------------------------------- public


@dataclass(frozen=True)
class Selector:
    """One compiled selector expression."""

    expression: str
    _evaluate: Node

    def matches(self, view: DeviceView) -> bool:
        """True when the device matches; SelectorError when evaluation fails."""
        try:
            result = self._evaluate(view)
        except SelectorError as error:
            raise SelectorError(f"CEL selector `{self.expression}`: {error}") from None
        if not isinstance(result, bool):
            raise SelectorError(
                f"CEL selector `{self.expression}` must evaluate to a bool, got {_type(result)}"
            )
        return result


@functools.lru_cache(maxsize=512)
def compile_selector(expression: str) -> Selector:
    """Compile `expression`; UnsupportedExpression when it is outside the subset."""
    if not expression.strip():
        raise UnsupportedExpression("CEL selector is empty")
    return Selector(expression, _Parser(expression).parse())
