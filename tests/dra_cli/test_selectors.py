"""Selector results shared by devices alike to the selector (dra_cli.selectors): what a
selector reads, found in its text; one evaluation per key; the same answers, errors
included, as evaluating every device."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from simdra._driver.dra_cli.selectors import SharedSelectors, reads
from simdra._driver.testing.allocation.cel import (
    DeviceView,
    Selector,
    SelectorError,
    compile_selector,
)

D = "gpu.example.com"


@pytest.mark.parametrize(("expression", "expected"), [
    (f'device.driver == "{D}" && device.attributes["{D}"].type == "gpu"',
     (("attributes", D, "type"),)),
    ("device.attributes['x.io']['model'] == 'a' || device.capacity[\"x.io\"].memory "
     "> quantity('1Gi')", (("attributes", "x.io", "model"), ("capacity", "x.io", "memory"))),
    ('has(device.attributes["x.io"].serial)', (("attributes", "x.io", "serial"),)),
    ("device.allowMultipleAllocations", ()),
    # Reads of the device that depend on more than named values: no sharing.
    ('device.attributes["x.io"].all(k, k != "a")', None),
    ('"serial" in device.attributes["x.io"]', None),
    ('cel.bind(d, device, d.driver == "x")', None),
    ('device.driver == "device"', None),
])
def test_what_a_selector_reads(expression: str, expected: Any) -> None:
    assert reads(expression) == expected


@dataclass
class Dev:
    driver: str
    spec: dict[str, Any]


@dataclass
class Counting:
    """A selector that counts its evaluations."""

    inner: Selector
    calls: list[str] = field(default_factory=list)

    @property
    def expression(self) -> str:
        return self.inner.expression

    @property
    def list_type_attributes(self) -> bool:
        return self.inner.list_type_attributes

    def matches(self, view: DeviceView) -> bool:
        self.calls.append("x")
        return self.inner.matches(view)


def _gpu(index: int, model: str = "H100", **more: Any) -> Dev:
    attributes = {"model": {"string": model}, "index": {"int": index},
                  "uuid": {"string": f"GPU-{index}"}, **more}
    return Dev(D, {"name": f"gpu-{index}", "attributes": attributes,
                   "capacity": {"memory": {"value": "80Gi"}}})


def _outcome(selector: Any, device: Dev, shared: SharedSelectors | None = None) -> Any:
    try:
        if shared is None:
            return selector.matches(DeviceView.of(device.driver, device.spec))
        return shared.matches(selector, device)
    except SelectorError as err:
        return f"error: {err}"


@pytest.mark.parametrize("expression", [
    f'device.attributes["{D}"].model == "H100"',
    'device.attributes["gpu.example.com"].serial == "x"',  # no such key: an error
    f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) > 0',
    f'device.attributes["{D}"].index > 2',
    'device.attributes["gpu.example.com"].all(k, k != "serial")',  # not shared
])
def test_shared_answers_are_the_ones_each_device_gets(expression: str) -> None:
    devices = [_gpu(i) for i in range(6)] + [_gpu(6, "A100"), Dev("other.io", _gpu(7).spec),
                                             _gpu(8, driverVersion={"version": "not-semver"})]
    selector = compile_selector(expression)
    shared = SharedSelectors()
    assert [_outcome(selector, d, shared) for d in devices] == \
        [_outcome(selector, d) for d in devices]


def test_alike_devices_are_evaluated_once() -> None:
    selector = Counting(compile_selector(f'device.attributes["{D}"].model == "H100"'))
    shared = SharedSelectors()
    answers = [shared.matches(selector, _gpu(i)) for i in range(100)]  # type: ignore[arg-type]
    assert all(answers) and len(selector.calls) == 1
    assert not shared.matches(selector, _gpu(100, "A100"))  # type: ignore[arg-type]
    assert len(selector.calls) == 2


def test_a_device_whose_view_fails_is_not_answered_for_by_a_good_one() -> None:
    selector = compile_selector(f'device.attributes["{D}"].model == "H100"')
    shared = SharedSelectors()
    assert shared.matches(selector, _gpu(0, driverVersion={"version": "1.0.0"}))
    bad = _gpu(1, driverVersion={"version": "one"})
    with pytest.raises(SelectorError, match="semantic version"):
        shared.matches(selector, bad)
