"""DeviceClass and request CEL selectors, evaluated with celpy in the Kubernetes DRA environment.

The language is CEL as celpy (the cel-python package) parses it: `in` on lists and maps,
`has()`, `size()`, `matches()`, `?:`, macros (`all`, `exists`, `exists_one`, `map`,
`filter`, and the two-variable forms), arithmetic, raw and triple-quoted strings. On top
of it, what Kubernetes' DRA environment declares: the `device` variable (`driver`,
`attributes`, `capacity`, `allowMultipleAllocations`), the quantity and semver libraries,
the strings extension, regex `find` / `findAll`, Kubernetes' and cel-go's list functions,
the sets extension, `includes` and `cel.bind` (see the modules of this package). Not
implemented, so refused when compiled: optional syntax (`a.?b`), `format()`,
`strings.quote()`, `sortBy`, the URL / IP / CIDR libraries.

Module map: `checks` and `typecheck` (what the Kubernetes compiler refuses), `evaluator`
(celpy's evaluator with `cel.bind` and the hot rules), `operators`, `comprehensions`,
`kubernetes` (quantity, semver, includes), `strings`, `regex`, `lists`, `values`.

Semantics follow k8s.io/dynamic-resource-allocation/cel: an unqualified attribute or
capacity name belongs to the device's driver domain; an unknown domain is an empty map;
a missing name in a domain is a runtime "no such key" error, which `&&` / `||` absorb
when the other side decides the result (CEL's commutative logic). A selector that does
not compile (syntax, undeclared name, function or device field) raises
`UnsupportedExpression`; one whose evaluation fails raises `SelectorError`, as the
scheduler fails the claim's allocation on a CEL runtime error.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError

from simdra._driver.core.quantity import QuantityError
from simdra._driver.testing.allocation.cel import checks, typecheck
from simdra._driver.testing.allocation.cel.checks import Node
from simdra._driver.testing.allocation.cel.errors import SelectorError, UnsupportedExpression
from simdra._driver.testing.allocation.cel.evaluator import evaluate, prepare
from simdra._driver.testing.allocation.cel.kubernetes import KUBERNETES_FUNCTIONS
from simdra._driver.testing.allocation.cel.lists import LIST_FUNCTIONS
from simdra._driver.testing.allocation.cel.operators import OPERATORS
from simdra._driver.testing.allocation.cel.regex import REGEX_FUNCTIONS
from simdra._driver.testing.allocation.cel.strings import STRING_FUNCTIONS
from simdra._driver.testing.allocation.cel.values import (
    DomainMap,
    Quantity,
    Semver,
    SemverError,
    type_name,
)

__all__ = [
    "DeviceView",
    "Quantity",
    "Selector",
    "SelectorError",
    "Semver",
    "UnsupportedExpression",
    "compile_selector",
    "split_qualified_name",
]

FUNCTIONS = {
    **OPERATORS,
    **STRING_FUNCTIONS,
    **LIST_FUNCTIONS,
    **REGEX_FUNCTIONS,
    **KUBERNETES_FUNCTIONS,
}


@dataclass(frozen=True)
class DeviceView:
    """What a selector sees of one device: the input of the CEL `device` variable."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, Quantity]]
    allow_multiple_allocations: bool = False
    list_attributes: tuple[str, ...] = ()  # names of list-typed attributes, as published

    @classmethod
    def of(cls, driver: str, device: Mapping[str, Any]) -> DeviceView:
        """The view of `device` (a ResourceSlice `spec.devices[]` entry) of `driver`."""
        attributes: dict[str, dict[str, Any]] = {}
        for name, entry in (device.get("attributes") or {}).items():
            domain, ident = split_qualified_name(name, driver)
            attributes.setdefault(domain, {})[ident] = _attribute_value(name, entry)
        capacity: dict[str, dict[str, Quantity]] = {}
        for name, entry in (device.get("capacity") or {}).items():
            domain, ident = split_qualified_name(name, driver)
            try:
                capacity.setdefault(domain, {})[ident] = Quantity.parse(entry["value"])
            except QuantityError as error:
                raise SelectorError(f"capacity {name}: {error}") from None
        lists = tuple(
            name
            for name, entry in (device.get("attributes") or {}).items()
            if any(kind + "s" in entry for kind, _ in _ATTRIBUTE_KINDS)
        )
        allow = bool(device.get("allowMultipleAllocations"))
        return cls(driver, attributes, capacity, allow, lists)

    @functools.cached_property
    def variable(self) -> celtypes.MapType:
        """The `device` variable as celpy values (built once per device)."""
        return celtypes.MapType({
            celtypes.StringType("driver"): celtypes.StringType(self.driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                self.allow_multiple_allocations
            ),
            celtypes.StringType("attributes"): _domains(self.attributes),
            celtypes.StringType("capacity"): _domains(self.capacity),
        })  # fmt: skip


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, identifier) of an attribute or capacity name; unqualified -> driver domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


_ATTRIBUTE_KINDS: tuple[tuple[str, Any], ...] = (
    ("int", celtypes.IntType),
    ("bool", celtypes.BoolType),
    ("string", celtypes.StringType),
    ("version", Semver.parse),
)


def _attribute_value(name: str, entry: Mapping[str, Any]) -> Any:
    try:
        for kind, convert in _ATTRIBUTE_KINDS:
            if kind in entry:
                return convert(entry[kind])
            if kind + "s" in entry:
                return celtypes.ListType(convert(v) for v in entry[kind + "s"])
    except SemverError as error:
        raise SelectorError(f"attribute {name}: parse semantic version: {error}") from None
    raise SelectorError(f"attribute {name}: unsupported attribute value {dict(entry)!r}")


def _domains(by_domain: Mapping[str, Mapping[str, Any]]) -> DomainMap:
    return DomainMap({
        celtypes.StringType(domain): celtypes.MapType(
            {celtypes.StringType(k): v for k, v in entries.items()}
        )
        for domain, entries in by_domain.items()
    })  # fmt: skip


@dataclass(frozen=True)
class Selector:
    """One compiled selector expression."""

    expression: str
    _ast: Node
    list_type_attributes: bool = True

    def matches(self, view: DeviceView) -> bool:
        """True when the device matches; SelectorError when evaluation fails."""
        if view.list_attributes and not self.list_type_attributes:
            raise SelectorError(
                f"CEL selector `{self.expression}`: attribute {view.list_attributes[0]}: "
                "unsupported attribute value"  # as the scheduler, without DRAListTypeAttributes
            )
        try:
            result = evaluate(self._ast, _activation(), view.variable)
        except CELEvalError as error:
            raise SelectorError(f"CEL selector `{self.expression}`: {describe(error)}") from None
        except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as error:
            # celpy lets a few Python errors through (deep nesting, odd operands).
            raise SelectorError(f"CEL selector `{self.expression}`: {error!r}") from None
        if not isinstance(result, celtypes.BoolType):
            got = type_name(result)
            raise SelectorError(
                f"CEL selector `{self.expression}` must evaluate to a bool, got {got}"
            )
        return bool(result)


def describe(error: CELEvalError) -> str:
    """One line for a CEL runtime error ("no such key: serial")."""
    message = str(error.args[0]) if error.args else "evaluation failed"
    details = error.args[2] if len(error.args) > 2 else None
    if message == "no such key" and details:
        return f"no such key: {details[0]}"
    if message == "no such overload" and details:
        return f"no such overload: {details[0]}"
    return message


@functools.cache
def _environment() -> celpy.Environment:
    # Building the parser takes ~0.1 s: once, and only when a selector is compiled.
    return celpy.Environment()


@functools.cache
def _activation() -> Activation:
    return Activation(functions=FUNCTIONS)


@functools.lru_cache(maxsize=512)
def compile_selector(expression: str, *, list_type_attributes: bool = True) -> Selector:
    """Compile `expression`; UnsupportedExpression when Kubernetes would not compile it.

    `list_type_attributes` is the DRAListTypeAttributes feature gate (alpha in 1.36, off
    by default there): off, attribute values are of type `any` (no macros over them) and
    a device with a list attribute fails every selector, as in Kubernetes.
    """
    if not expression.strip():
        raise UnsupportedExpression("CEL selector is empty")
    try:
        ast = _environment().compile(expression)
        checks.check(ast)
        if not list_type_attributes:
            checks.check_without_list_attributes(ast)
        typecheck.check_types(ast)
    except CELParseError as error:
        where = f" at column {error.column}" if getattr(error, "column", None) else ""
        raise UnsupportedExpression(f"CEL selector `{expression}`: syntax error{where}") from None
    except checks.CheckError as error:
        where = f" at column {error.column}" if error.column else ""
        raise UnsupportedExpression(f"CEL selector `{expression}`: {error}{where}") from None
    return Selector(expression, prepare(ast), list_type_attributes)
