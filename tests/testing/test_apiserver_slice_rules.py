"""The stand-in's own ResourceSlice rules report each error as kube-apiserver does: the
field path and the error type (the StatusCause reason a client branches on)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from simdra._driver.testing.apiserver.validation import slice_errors
from simdra._driver.testing.apiserver.validation.field import too_many
from simdra._driver.testing.apiserver.validation.sizes import shorten
from tests.testing.conftest import device, slice_body

JSON = dict[str, Any]
DEV = "spec.devices[0]"
POLICY = f"{DEV}.capacity[bw].requestPolicy"


def _slice(**device_fields: Any) -> JSON:
    return slice_body(devices=[device("gpu-0", **device_fields)], name="s")


def _shared(**policy: Any) -> Callable[[], JSON]:
    capacity = {"bw": {"value": "10", "requestPolicy": policy}}
    return lambda: _slice(allowMultipleAllocations=True, capacity=capacity)


def _causes(obj: JSON, current: JSON | None = None) -> set[tuple[str, str]]:
    return {(e.field, e.reason.removeprefix("FieldValue")) for e in slice_errors(obj, current)}


def _spec(**changes: Any) -> Callable[[], JSON]:
    def build() -> JSON:
        obj = _slice()
        obj["spec"].update(changes)
        return {**obj, "spec": {k: v for k, v in obj["spec"].items() if v is not None}}

    return build


CASES: list[tuple[str, Callable[[], JSON], set[tuple[str, str]]]] = [
    ("empty driver: missing and malformed", _spec(driver=""),
     {("spec.driver", "Required"), ("spec.driver", "Invalid")}),
    ("long driver", _spec(driver="d" * 64), {("spec.driver", "TooLong")}),
    ("capitals in a driver name are fine", _spec(driver="GPU.Example.COM"), set()),
    ("pool name part", _spec(pool={"name": "a//b", "resourceSliceCount": 1}),
     {("spec.pool.name", "Invalid")}),
    ("no node choice", _spec(nodeName=None), {("spec", "Required")}),
    ("empty nodeName", _spec(nodeName=""), {("spec.nodeName", "Invalid"), ("spec", "Required")}),
    ("allNodes false", _spec(nodeName=None, allNodes=False),
     {("spec.allNodes", "Invalid"), ("spec", "Required")}),
    ("two node selector terms",
     _spec(nodeName=None, nodeSelector={"nodeSelectorTerms": [{}, {}]}),
     {("spec.nodeSelector.nodeSelectorTerms", "Invalid")}),
    ("Exists with values", _spec(nodeName=None, nodeSelector={"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]}]}),
     {("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values", "Forbidden")}),
    ("empty taint key is malformed, not missing",
     lambda: _slice(taints=[{"key": "", "effect": "NoSchedule"}]),
     {(f"{DEV}.taints[0].key", "Invalid")}),
    ("taint effect", lambda: _slice(taints=[{"key": "k", "effect": "Sometimes"}]),
     {(f"{DEV}.taints[0].effect", "NotSupported")}),
    ("17 taints", lambda: _slice(taints=[{"key": "k", "effect": "None"}] * 17),
     {(f"{DEV}.taints", "TooMany")}),
    ("3 counter consumptions", lambda: _slice(consumesCounters=[
        {"counterSet": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(3)]),
     {(f"{DEV}.consumesCounters", "TooMany")}),
    ("counter set consumed twice", lambda: _slice(consumesCounters=[
        {"counterSet": "s", "counters": {"c": {"value": "1"}}}] * 2),
     {(f"{DEV}.consumesCounters[1]", "Duplicate")}),
    ("consumption without counters", lambda: _slice(consumesCounters=[{"counterSet": "s"}]),
     {(f"{DEV}.consumesCounters[0].counters", "Required")}),
    ("attribute name with two slashes", lambda: _slice(attributes={"a/b/c": {"int": 1}}),
     {(f"{DEV}.attributes", "Invalid")}),
    ("attribute identifier of 33 bytes", lambda: _slice(attributes={"a" * 33: {"int": 1}}),
     {(f"{DEV}.attributes", "TooLong")}),
    ("string attribute of 65 bytes", lambda: _slice(attributes={"s": {"string": "x" * 65}}),
     {(f"{DEV}.attributes[s].string", "TooLong")}),
    ("33 attributes and capacities",
     lambda: _slice(attributes={f"a{i}": {"int": i} for i in range(32)}),
     {(DEV, "Invalid")}),
    ("policy on an unshared device",
     lambda: _slice(capacity={"bw": {"value": "1", "requestPolicy": {"default": "1"}}}),
     {(POLICY, "Forbidden")}),
    ("values and range", _shared(default="1", validValues=["1"], validRange={"min": "1"}),
     {(POLICY, "Forbidden")}),
    ("range without default", _shared(validRange={"min": "1"}),
     {(f"{POLICY}.default", "Required")}),
    ("default below min lands on the default (1.37)",
     _shared(default="1", validRange={"min": "2"}),
     {(f"{POLICY}.validRange.default", "Invalid")}),
    ("options equal as written decimals (1.37, DRAFractionalCapacityRange)",
     _shared(default="2", validValues=["1", "1000m", "1500m", "2", "2e0"]),
     {(f"{POLICY}.validValues[4]", "Duplicate")}),
    ("11 options: too many, and the default is not looked for",
     _shared(default="1", validValues=[str(i) for i in range(1, 12)]),
     {(f"{POLICY}.validValues", "TooMany"), (f"{POLICY}.validValues", "Invalid")}),
    ("binding failure conditions alone", lambda: _slice(bindingFailureConditions=["failed"]),
     {(f"{DEV}.bindingConditions", "Invalid")}),
    ("device node field without perDeviceNodeSelection", lambda: _slice(allNodes=True),
     {(DEV, "Invalid")}),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_reports_the_servers_field_and_type(build, expected) -> None:
    assert _causes(build()) == expected


def test_taints_lower_the_device_limit_to_64() -> None:
    plain = slice_body(devices=[device(f"d-{i}") for i in range(65)], name="s")
    assert _causes(plain) == set()
    tainted = copy.deepcopy(plain)
    tainted["spec"]["devices"][0]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    assert _causes(tainted) == {("spec.devices", "TooMany")}


def test_an_update_keeps_driver_pool_and_node() -> None:
    before = _slice()
    after = copy.deepcopy(before)
    after["spec"].update(driver="other.example.com", nodeName="node-2")
    after["spec"]["pool"]["name"] = "other"
    assert _causes(after, before) == {
        ("spec.driver", "Invalid"), ("spec.nodeName", "Invalid"), ("spec.pool.name", "Invalid")
    }


def test_a_long_map_key_is_shortened_in_the_middle_of_a_value_path() -> None:
    key = "dra.example.com/" + "x" * 30
    obj = _slice(attributes={f"{key}" + "y" * 70: {"string": "s" * 65}})
    (error,) = [e for e in slice_errors(obj) if e.field.endswith(".string")]
    assert "..." in error.field and len(error.field) < len(key) + 100
    assert shorten("a" * 100, 96) == "a" * 47 + "..." + "a" * 46


def test_errors_read_as_the_server_writes_them() -> None:
    assert str(too_many("spec.devices", 129, 128)) == (
        "spec.devices: Too many: 129: must have at most 128 items"
    )
    (error,) = slice_errors(_slice(taints=[{"key": "k", "effect": "Sometimes"}]))
    assert error.message == (
        'Unsupported value: "Sometimes": supported values: "NoExecute", "NoSchedule", "None"'
    )


def test_an_update_does_not_check_unchanged_capacity_and_taints_again() -> None:
    """A slice stored under older rules (here: a taint effect and a request policy the
    current rules refuse) stays writable while those parts are left alone."""
    capacity = {"bw": {"value": "1", "requestPolicy": {"default": "1"}}}
    stored = _slice(taints=[{"key": "k", "effect": "Someday"}], capacity=capacity)
    assert _causes(stored) == {
        (f"{DEV}.taints[0].effect", "NotSupported"),
        (f"{DEV}.capacity[bw].requestPolicy", "Forbidden"),
    }
    relabelled = copy.deepcopy(stored)
    relabelled["spec"]["devices"][0]["attributes"]["model"] = {"string": "sim-h100"}
    assert _causes(relabelled, stored) == set()
    retainted = copy.deepcopy(relabelled)
    retainted["spec"]["devices"][0]["taints"][0]["value"] = "v"
    assert _causes(retainted, stored) == {(f"{DEV}.taints[0].effect", "NotSupported")}
