"""The stand-in's static CEL type check refuses what kube-apiserver 1.36.3 refused for
its types, and lets through what it accepted (each verdict was asked of a real server)."""

from __future__ import annotations

import pytest

from simdra._driver.testing.apiserver.validation.celtypes import (
    ANY,
    BOOL,
    DYN,
    TypeCheckError,
    result_type,
)

ATTR = 'device.attributes["d"]'
CAP = 'device.capacity["d"]'

ACCEPTED = [
    # DRAListTypeAttributes (on in the modelled 1.37): an attribute is dyn, a list of it
    # can be ranged over ("class: CEL iterates an attribute" in the recorded corpus).
    f"{ATTR}.ints.exists(i, i > 1)",
    f"{ATTR}.ints.all(i, i > 1)",
    f"has({ATTR}.a)",
    f"!has({ATTR}.a)",
    f'{ATTR}.model.matches("^a.*")',
    f'{ATTR}.model.startsWith("a")',
    f"size({ATTR}) > 0",
    f'{CAP}.mem.isGreaterThan(quantity("1Gi"))',
    f'{ATTR}.v.isGreaterThan(semver("1.0.0"))',
    '"x" in device.attributes',
    f'"x" in {ATTR}',
    'device.attributes.exists(k, k == "x")',
    "[1, 2].all(x, x > 0)",
    '{"a": 1}["a"] == 1',
    f'{ATTR}["model"] == "x"',
    f"{ATTR}.model == 1 || true",
    'device.driver == "a" ? true : false',
    f'cel.bind(m, {ATTR}, m.model == "x")',
    'device.driver + "x" == "y"',
    "1 < 2.0",
    f"{ATTR}.model.foo == 1",
    "device.allowMultipleAllocations",
    'device.driver in ["a", "b"]',
    f"{ATTR}.model",
    f'{ATTR}.model.lowerAscii() == "x"',
    f"{CAP}.mem.asApproximateFloat() > 1.0",
    f"int({ATTR}.idx) > 2",
    f"-{ATTR}.idx < 0",
    "device.driver.size() > 3",
    f"{ATTR}.ints.size() > 1",
    f"1 in {ATTR}.ints",
    f"{ATTR}.x.y == 1",
    f"{ATTR}.model == {ATTR}.other",
    f"dyn({ATTR}.ints).exists(i, i > 1)",
    f"!{ATTR}.healthy",
    f"{ATTR}.n * 2 > 3",
    'quantity("abc").isInteger()',  # fails when evaluated, not when compiled
    f'{CAP}.mem == quantity("1Gi")',
    f'{ATTR}.v.compareTo(semver("1.0.0")) > 0',
    "device.capacity.exists(k, k == 'd')",
    f"{ATTR}.exists(k, k == 'model')",
]
REFUSED = [
    f"{CAP}.mem",  # a quantity
    f'{CAP}.mem.compareTo(quantity("1"))',  # an int
    'device.driver == "a" ? 1 : 2',
    "device.driver",
    "1 == 1.0",
    "device.driver.x == 1",
    "device.colour == 1",
    "x.exists(y, y)",
    'device.allowMultipleAllocations == "true"',
    'device.driver in "abc"',
    'quantity("1") < quantity("2")',
    "true && device.driver",
    f"{ATTR}.model.matches(1)",
    "device.driver.startsWith(1)",
    'quantity(1) == quantity("1")',
    f"{CAP}.mem > 1",
    "device.nope",
    "has(device.nope)",
]


@pytest.mark.parametrize("expression", ACCEPTED)
def test_accepted_by_the_real_server(expression: str) -> None:
    assert result_type(expression) in (BOOL, DYN, ANY)


@pytest.mark.parametrize("expression", REFUSED)
def test_refused_by_the_real_server(expression: str) -> None:
    try:
        kind = result_type(expression)
    except TypeCheckError:
        return
    assert kind not in (BOOL, DYN, ANY)


def test_error_names_the_position_of_the_unknown_field() -> None:
    with pytest.raises(TypeCheckError, match="undefined field 'colour'") as error:
        result_type("device.colour == 1")
    assert error.value.pos == 6  # the server points at the '.'
