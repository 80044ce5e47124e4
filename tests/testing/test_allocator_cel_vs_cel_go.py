"""The allocator's CEL against Kubernetes' own, case by case.

tests/testing/cel_go_cases.json holds the verdicts of k8s.io/dynamic-resource-allocation/cel
(the compiler and evaluator the scheduler uses; versions as tests/e2e/go.mod pins them) on
every expression of tests/testing/cel_oracle/cel_cases.txt, for one device: compile error,
runtime error, true or false. Re-record with tests/testing/cel_oracle/regenerate.sh after
adding cases. Every verdict must be ours too, except the differences listed below, each
with why; a difference that disappears fails too, so the list stays true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driver.testing.allocation.cel import (
    DeviceView,
    SelectorError,
    UnsupportedExpression,
    compile_selector,
)

RECORDED = json.loads((Path(__file__).parent / "cel_go_cases.json").read_text())
VIEW = DeviceView.of(RECORDED["driver"], RECORDED["device"])
ATTR = 'device.attributes["dra.example.com"]'

REFUSED = "compile"  # we refuse what Kubernetes accepts: a clear error, never a wrong answer
NOT_IMPLEMENTED = {
    f'{ATTR}.?model.orValue("") == "x"': "optional syntax: not in celpy's grammar",
    f"{ATTR}.ports.all(i, v, v > 0)": "two-variable comprehensions",
    f"{ATTR}.ports.transformList(i, v, v) == [1, 3, 5]": "two-variable comprehensions",
    f"{ATTR}.ports.map(x, x > 1, x * 2) == [6, 10]": "map() with a filter",
    '"abc".format([]) == "abc"': "strings extension format()",
    '"%s".format(["x"]) == "x"': "strings extension format()",
    'strings.quote("a") == "\\"a\\""': "strings extension strings.quote()",
    "[1, 2].distinct() == [1, 2]": "cel-go lists extension",
    "[1, 2].slice(0, 1) == [1]": "cel-go lists extension",
    "lists.range(2) == [0, 1]": "cel-go lists extension",
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
# cel-go evaluates constant conversions when it builds the program: a compile error there,
# a runtime error here.
FOLDED = {"int('0x10') == 16", 'int("0x10") == 16', "uint(-1) == 1u"}


def expected(case: dict[str, str]) -> str:
    """The verdict we must give: Kubernetes', or the listed difference."""
    expression = case["expression"]
    if expression in NOT_IMPLEMENTED:
        return REFUSED
    if expression in FOLDED:
        return "runtime"
    return ELEMENT_TYPES.get(expression, case["outcome"])


def verdict(expression: str) -> str:
    """Ours: compile, runtime, true or false."""
    try:
        selector = compile_selector(expression)
    except UnsupportedExpression:
        return "compile"
    try:
        return "true" if selector.matches(VIEW) else "false"
    except SelectorError:
        return "runtime"


@pytest.mark.parametrize("case", RECORDED["cases"], ids=lambda case: case["expression"])
def test_same_verdict_as_kubernetes(case):
    assert verdict(case["expression"]) == expected(case), (
        f"Kubernetes: {case['outcome']} {case['detail']}"
    )


def test_listed_differences_are_recorded_cases():
    recorded = {case["expression"] for case in RECORDED["cases"]}
    listed = set(NOT_IMPLEMENTED) | set(ELEMENT_TYPES) | FOLDED
    assert listed <= recorded
    # Each listed difference is a real one: Kubernetes' verdict is not ours.
    by_expression = {case["expression"]: case for case in RECORDED["cases"]}
    assert all(by_expression[e]["outcome"] != expected(by_expression[e]) for e in listed)
