"""The allocator's CEL against Kubernetes' own, case by case.

tests/testing/cel_go_cases.json holds the verdicts of k8s.io/dynamic-resource-allocation/cel
(the compiler and evaluator the scheduler uses; versions as tests/e2e/go.mod pins them) on
every expression of tests/testing/cel_oracle/cel_cases.txt, for one device: compile error,
runtime error, true or false; once with the DRAListTypeAttributes gate on, once off (the
1.36 default, with a device that has no list attributes). Re-record with
tests/testing/cel_oracle/regenerate.sh after adding cases. Every verdict must be ours
too, except the differences listed below, each with why; a difference that disappears
fails too, so the list stays true.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.testing.allocation.cel import (
    DeviceView,
    SelectorError,
    UnsupportedExpression,
    compile_selector,
)

RECORDED = json.loads((Path(__file__).parent / "cel_go_cases.json").read_text())
CASES = [
    (configuration, case)
    for configuration in RECORDED["configurations"]
    for case in configuration["cases"]
]
ATTR = 'device.attributes["dra.example.com"]'

REFUSED = "compile"  # we refuse what Kubernetes accepts: a clear error, never a wrong answer
NOT_IMPLEMENTED = {
    f'{ATTR}.?model.orValue("") == "x"': "optional syntax: not in celpy's grammar",
    '"abc".format([]) == "abc"': "strings extension format()",
    '"%s".format(["x"]) == "x"': "strings extension format()",
    'strings.quote("a") == "\\"a\\""': "strings extension strings.quote()",
    'url("https://x").getHost() == "x"': "Kubernetes URL library",
    'ip("1.2.3.4").family() == 4': "Kubernetes IP library",
    'isIP("1.2.3.4")': "Kubernetes IP library",
    'cidr("10.0.0.0/8").containsIP("10.1.1.1")': "Kubernetes CIDR library",
}
# Kubernetes knows the element types of list and map literals and refuses these when it
# compiles them; we know only that they are lists and maps, and evaluate them.
ELEMENT_TYPES = {
    'semver("1.0.0") in [1, 2]': "false",
    "sets.intersects([1], [1.0])": "true",
    "{'a': 1} == {'a': 1.0}": "true",
    "[1] == [1.0]": "true",
}
# cel-go's checker takes `dyn.reverse().sort()` for a list(int) (the first overload of
# sort); we leave the element type dyn.
# (Without the gate the recorded device has no `modes`: a runtime error here.)
QUIRKS = {f'{ATTR}.modes.reverse().sort()[0] == "compute"': {True: "true", False: "runtime"}}
# cel-go evaluates constant conversions when it builds the program: a compile error there,
# a runtime error here.
FOLDED = {"int('0x10') == 16", 'int("0x10") == 16', "uint(-1) == 1u"}


def expected(case: dict[str, str], lists: bool) -> str:
    """The verdict we must give: Kubernetes', or the listed difference."""
    expression = case["expression"]
    if expression in QUIRKS:
        return QUIRKS[expression][lists]
    if expression in NOT_IMPLEMENTED:
        return REFUSED
    if expression in FOLDED:
        return "runtime"
    return ELEMENT_TYPES.get(expression, case["outcome"])


def verdict(expression: str, configuration: dict[str, Any]) -> str:
    """Ours: compile, runtime, true or false."""
    lists = configuration["list_type_attributes"]
    view = DeviceView.of(RECORDED["driver"], configuration["device"])
    try:
        selector = compile_selector(expression, list_type_attributes=lists)
    except UnsupportedExpression:
        return "compile"
    try:
        return "true" if selector.matches(view) else "false"
    except SelectorError:
        return "runtime"


@pytest.mark.parametrize(
    ("configuration", "case"),
    CASES,
    ids=[f"lists={c['list_type_attributes']}:{case['expression']}" for c, case in CASES],
)
def test_same_verdict_as_kubernetes(configuration, case):
    lists = configuration["list_type_attributes"]
    assert verdict(case["expression"], configuration) == expected(case, lists), (
        f"Kubernetes: {case['outcome']} {case['detail']}"
    )


def test_listed_differences_are_real_ones():
    listed = set(NOT_IMPLEMENTED) | set(ELEMENT_TYPES) | set(QUIRKS) | FOLDED
    differing: set[str] = set()
    for configuration in RECORDED["configurations"]:
        by_expression = {case["expression"]: case for case in configuration["cases"]}
        assert listed <= set(by_expression)
        lists = configuration["list_type_attributes"]
        differing |= {
            e for e in listed if by_expression[e]["outcome"] != expected(by_expression[e], lists)
        }
    # A difference that is gone in every configuration must leave the list.
    assert differing == listed


def test_without_the_gate_a_list_attribute_fails_every_selector():
    device = {"name": "d", "attributes": {"modes": {"strings": ["a"]}, "n": {"int": 1}}}
    view = DeviceView.of("dra.example.com", device)
    selector = compile_selector(f"{ATTR}.n == 1", list_type_attributes=False)
    with pytest.raises(SelectorError, match="attribute modes: unsupported attribute value"):
        selector.matches(view)
    assert compile_selector(f"{ATTR}.n == 1").matches(view)
