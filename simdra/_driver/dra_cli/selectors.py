"""CEL selector results shared by the devices that look alike to a selector.

cel-python takes about 0.1 ms an evaluation and building a device's view (its attributes
and capacities as CEL values) about 0.07 ms, so checking 8,000 GPUs against a class and a
request selector, twice (`why`'s device checks, then its search node by node), took 5 s.
Yet a selector reads little of a device: `device.driver == "d" && device.attributes["d"]
.type == "gpu"` reads the driver and one attribute, and the fleet's 8,000 GPUs all have
the same. So a result is kept per key: what the selector reads of the device (found in
its text: each `device.attributes["domain"].name`, `device.capacity["domain"]["name"]`,
`device.driver`, `device.allowMultipleAllocations`), plus whatever could make building
the device's view fail or differ (version and capacity values, list-typed attributes).
An expression that reads `device` any other way (a macro over a domain, `cel.bind`,
`device` in a string) gets no sharing: each device is evaluated, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from simdra._driver.testing.allocation.cel import DeviceView, Selector, SelectorError
from simdra._driver.testing.allocation.pools import Candidate
from simdra._driver.testing.allocation.requests import RequestSpec
from simdra._driver.testing.allocation.search import Search

_STRING = r"""(?:"([^"\\]*)"|'([^'\\]*)')"""
# One read of the `device` variable whose result depends on named values only: `(?!\s*\()`
# refuses a name that is a macro or method of the whole map (`.all(...)`, `.exists(...)`).
_ACCESS = re.compile(
    r"\bdevice\s*\.\s*(?:(?:driver|allowMultipleAllocations)\b(?!\s*\()"
    r"|(attributes|capacity)\s*\[\s*" + _STRING + r"\s*\]\s*"
    r"(?:\.\s*([A-Za-z_]\w*)\b(?!\s*\()|\[\s*" + _STRING + r"\s*\]))")
_DEVICE = re.compile(r"\bdevice\b")
# Attribute kinds whose conversion to a CEL value cannot fail and whose value is one item.
_PLAIN = ("string", "int", "bool")
Read = tuple[str, str, str]  # ("attributes" or "capacity", domain, name)


class HasSpec(Protocol):
    """A published device: its driver and its ResourceSlice `spec.devices[]` entry."""

    @property
    def driver(self) -> str: ...

    @property
    def spec(self) -> Mapping[str, Any]: ...


def reads(expression: str) -> tuple[Read, ...] | None:
    """The attributes and capacities `expression` reads, by domain and name; None when
    it reads the `device` variable in any other way too."""
    found = list(_ACCESS.finditer(expression))
    if len(found) != len(_DEVICE.findall(expression)):
        return None
    out = []
    for m in found:
        if m[1]:  # attributes or capacity, not driver or allowMultipleAllocations
            domain = m[2] if m[2] is not None else m[3]
            name = m[4] or (m[5] if m[5] is not None else m[6])
            out.append((m[1], domain, name))
    return tuple(out)


class SharedSelectors:
    """Selector results by (expression, key); one per command run."""

    def __init__(self) -> None:
        self._reads: dict[str, tuple[Read, ...] | None] = {}
        self._results: dict[tuple[Any, ...], bool | str] = {}
        # id(spec) -> (spec, what any selector may see of it), and the result by selector
        # and id(spec): the key is made once per device and selector, not once per pass
        # (`why` asks twice of each of 8,000 GPUs, for two selectors). The spec is kept,
        # so that its id is not another's.
        self._shapes: dict[int, tuple[Mapping[str, Any], tuple[Any, ...]]] = {}
        self._decided: dict[tuple[str, bool, int], bool | str] = {}
        self._alike: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # one copy of each shape

    def matches(self, selector: Selector, device: HasSpec) -> bool:
        """selector.matches(the device's view), shared with the devices of the same key;
        SelectorError as it raises."""
        expression = selector.expression
        if expression not in self._reads:
            self._reads[expression] = reads(expression)
        wanted = self._reads[expression]
        if wanted is None:
            return selector.matches(_view(device))
        decided = (expression, selector.list_type_attributes, id(device.spec))
        found = self._decided.get(decided)
        if found is None:
            found = self._decided[decided] = self._result(selector, device, wanted)
        if isinstance(found, str):
            raise SelectorError(found)
        return found

    def _result(self, selector: Selector, device: HasSpec, wanted: tuple[Read, ...]) -> bool | str:
        """The result for the device's key (an error as its text)."""
        key = (selector.expression, selector.list_type_attributes, self._shape(device),
               _read(device, wanted))
        found = self._results.get(key)
        if found is None:
            try:
                found = selector.matches(_view(device))
            except SelectorError as err:
                found = str(err)
            self._results[key] = found
        return found

    def _shape(self, device: HasSpec) -> tuple[Any, ...]:
        spec = device.spec
        known = self._shapes.get(id(spec))
        if known is None or known[0] is not spec:
            shape = _device_shape(device)
            known = self._shapes[id(spec)] = (spec, self._alike.setdefault(shape, shape))
        return known[1]

    def all_match(self, spec: RequestSpec, device: HasSpec) -> bool:
        """Every selector of the request (its class's first) matches."""
        return all(self.matches(s, device) for s in spec.selectors)


class SharedSearch(Search):
    """The harness's search, its selectors evaluated through SharedSelectors."""

    def __init__(self, *args: Any, shared: SharedSelectors, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shared = shared

    def matches(self, spec: RequestSpec, device: Candidate) -> bool:
        """As Search.matches (the same error text), with shared results."""
        try:
            return self.shared.all_match(spec, device)
        except SelectorError as error:
            raise SelectorError(
                f"claim {self.label}: request {spec.result_name}: device "
                f"{'/'.join(device.key)}: {error}") from None


def _view(device: HasSpec) -> DeviceView:
    # A Candidate keeps its view; an inventory Device builds one.
    if isinstance(device, Candidate):
        return device.view
    return DeviceView.of(device.driver, device.spec)


def _read(device: HasSpec, wanted: tuple[Read, ...]) -> tuple[str, ...]:
    """The values the selector reads of the device, as hashable text."""
    spec, driver = device.spec, device.driver
    read = []
    for field, domain, name in wanted:
        source = spec.get(field) or {}
        read.append(repr(source.get(f"{domain}/{name}")))
        if domain == driver:  # an unqualified name is the driver's domain
            read.append(repr(source.get(name)))
    return tuple(read)


def _device_shape(device: HasSpec) -> tuple[Any, ...]:
    """What the device's view is built from that could make it fail or differ, as
    hashable text (with the values a selector reads: the whole key)."""
    spec = device.spec
    attributes = spec.get("attributes") or {}
    capacity = spec.get("capacity") or {}
    return (device.driver, bool(spec.get("allowMultipleAllocations")),
            tuple(_shape(name, entry) for name, entry in attributes.items()),
            tuple((name, repr(entry)) for name, entry in capacity.items()))


def _shape(name: str, entry: Any) -> tuple[str, str]:
    """An attribute as far as building the view goes: a plain value cannot fail to
    convert, a list of plain values neither (but the view lists it); anything else (a
    version, an unknown kind) by its value, which the view may refuse."""
    if isinstance(entry, dict):
        for kind in _PLAIN:
            if kind in entry:
                return name, kind
            if kind + "s" in entry:
                return name, kind + "s"
    return name, repr(entry)
