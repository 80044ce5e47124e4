"""The API server's ResourceSlice rules (api-facts 4.2-4.8), one case per rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from simdra._driver.core.validation import (
    FieldError,
    device_limit,
    immutable_field_errors,
    validate_device,
    validate_slice,
    validate_slice_update,
)
from tests.fixtures import every_field

JSON = dict[str, Any]


def _device(name: str = "gpu-0", **extra: Any) -> JSON:
    return {
        "name": name,
        "attributes": {"model": {"string": "a100"}, "gpu.example.com/index": {"int": 0}},
        "capacity": {"memory": {"value": "80Gi"}},
        **extra,
    }


def _slice(devices: list[JSON] | None = None) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.example.com-abcde"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 0, "resourceSliceCount": 1},
            "devices": devices if devices is not None else [_device()],
        },
    }


def _shared(policy: JSON, value: str = "10G") -> JSON:
    return _device(
        "nic-0",
        allowMultipleAllocations=True,
        capacity={"bandwidth": {"value": value, "requestPolicy": policy}},
    )


def _errors(obj: JSON) -> list[tuple[str, str]]:
    return [(e.field, e.message) for e in validate_slice(obj)]


def _fields(obj: JSON) -> list[str]:
    return [e.field for e in validate_slice(obj)]


Mutation = Callable[[JSON], None]


def _spec(**changes: Any) -> Mutation:
    return lambda s: s["spec"].update(changes)


def _dev(**changes: Any) -> Mutation:
    return lambda s: s["spec"]["devices"][0].update(changes)


def _without(*path: str) -> Mutation:
    def mutate(s: JSON) -> None:
        node = s
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


def test_a_plain_slice_is_valid():
    assert validate_slice(_slice()) == []


def test_field_error_reads_like_the_api_server():
    error = FieldError("spec.devices[0].name", 'Invalid value: "X": bad', "FieldValueInvalid")
    assert str(error) == 'spec.devices[0].name: Invalid value: "X": bad'


# One rule per case: (mutation, the field the error must name, a phrase of its message).
RULES: list[tuple[str, Mutation, str, str]] = [
    # metadata
    (
        "name-format",
        lambda s: s["metadata"].update(name="Bad_Name"),
        "metadata.name",
        "RFC 1123 subdomain",
    ),
    (
        "name-required",
        lambda s: s.update(metadata={}),
        "metadata.name",
        "name or generateName is required",
    ),
    # driver (4.2 / 4.7)
    ("driver-required", _without("spec", "driver"), "spec.driver", "Required value"),
    ("driver-too-long", _spec(driver="a" * 60 + ".com"), "spec.driver", "Too long"),
    ("driver-format", _spec(driver="gpu_example.com"), "spec.driver", "RFC 1123 subdomain"),
    # pool (4.3)
    (
        "pool-name-required",
        lambda s: s["spec"]["pool"].update(name=""),
        "spec.pool.name",
        "Required value",
    ),
    (
        "pool-name-part",
        lambda s: s["spec"]["pool"].update(name="a//b"),
        "spec.pool.name",
        "RFC 1123 subdomain",
    ),
    (
        "pool-name-too-long",
        lambda s: s["spec"]["pool"].update(name="/".join(["a" * 60] * 5)),
        "spec.pool.name",
        "Too long",
    ),
    (
        "pool-generation",
        lambda s: s["spec"]["pool"].update(generation=-1),
        "spec.pool.generation",
        "greater than or equal to zero",
    ),
    (
        "pool-slice-count",
        lambda s: s["spec"]["pool"].update(resourceSliceCount=0),
        "spec.pool.resourceSliceCount",
        "greater than zero",
    ),
    # node selection one-of (4.2)
    (
        "node-selection-none",
        _without("spec", "nodeName"),
        "spec",
        "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
        "required",
    ),
    ("node-selection-many", _spec(allNodes=True), "spec", "multiple fields are set"),
    ("node-name-empty", _spec(nodeName=""), "spec.nodeName", "non-empty string"),
    ("node-name-format", _spec(nodeName="Node_1"), "spec.nodeName", "RFC 1123 subdomain"),
    (
        "all-nodes-false",
        lambda s: s["spec"].update(allNodes=False),
        "spec.allNodes",
        "must be either unset or set to true",
    ),
    (
        "per-device-false",
        _spec(perDeviceNodeSelection=False),
        "spec.perDeviceNodeSelection",
        "must be either unset or set to true",
    ),
    (
        "node-selector-one-term",
        lambda s: (
            s["spec"].pop("nodeName"),
            s["spec"].update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                        {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
                    ]
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms",
        "exactly one node selector term",
    ),
    (
        "node-selector-operator",
        lambda s: (
            s["spec"].pop("nodeName"),
            s["spec"].update(
                nodeSelector={
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Maybe"}]}]
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
        "Unsupported value",
    ),
    (
        # Found by the differential against the stand-in's own rule book.
        "node-selector-field-value",
        lambda s: (
            s["spec"].pop("nodeName"),
            s["spec"].update(
                nodeSelector={
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["Node_1"]}
                            ]
                        }
                    ]
                }
            ),
        ),
        "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]",
        "RFC 1123 subdomain",
    ),
    (
        "device-node-without-per-device",
        _dev(nodeName="node-1"),
        "spec.devices[0]",
        "can only be set if `perDeviceNodeSelection`",
    ),
    (
        "per-device-needs-device-choice",
        lambda s: (s["spec"].pop("nodeName"), s["spec"].update(perDeviceNodeSelection=True)),
        "spec.devices[0]",
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required",
    ),
    # devices and counters (4.2, 4.6)
    (
        "devices-and-counters",
        _spec(sharedCounters=[{"name": "set", "counters": {"mem": {"value": "1"}}}]),
        "spec",
        "only one of `sharedCounters` or `devices` is allowed",
    ),
    ("device-name-format", _dev(name="GPU_0"), "spec.devices[0].name", "RFC 1123 label"),
    (
        "device-name-required",
        _without("spec", "devices", 0, "name"),
        "spec.devices[0].name",
        "Required value",
    ),
    (
        "device-name-unique",
        lambda s: s["spec"]["devices"].extend([_device("gpu-1"), _device()]),
        "spec.devices[2]",
        'Duplicate value: "gpu-0"',
    ),
    # attributes and capacity (4.4, 4.5, 4.7)
    (
        "attribute-name",
        lambda s: s["spec"]["devices"][0]["attributes"].update({"bad-name": {"int": 1}}),
        "spec.devices[0].attributes",
        "C identifier",
    ),
    (
        "attribute-name-too-long",
        lambda s: s["spec"]["devices"][0]["attributes"].update({"a" * 33: {"int": 1}}),
        "spec.devices[0].attributes",
        "Too long",
    ),
    (
        "attribute-domain",
        lambda s: s["spec"]["devices"][0]["attributes"].update({"Bad_Domain/model": {"int": 1}}),
        "spec.devices[0].attributes",
        "RFC 1123 subdomain",
    ),
    (
        "attribute-two-slashes",
        lambda s: s["spec"]["devices"][0]["attributes"].update({"a.com/b/c": {"int": 1}}),
        "spec.devices[0].attributes",
        "more than one slash",
    ),
    (
        "attribute-no-value",
        lambda s: s["spec"]["devices"][0]["attributes"].update(x={}),
        "spec.devices[0].attributes[x]",
        "exactly one value must be specified",
    ),
    (
        "attribute-two-values",
        lambda s: s["spec"]["devices"][0]["attributes"].update(x={"int": 1, "bool": True}),
        "spec.devices[0].attributes[x]",
        "exactly one value must be specified",
    ),
    (
        "attribute-string-length",
        lambda s: s["spec"]["devices"][0]["attributes"].update(x={"string": "s" * 65}),
        "spec.devices[0].attributes[x].string",
        "Too long",
    ),
    (
        "attribute-version-semver",
        lambda s: s["spec"]["devices"][0]["attributes"].update(x={"version": "v1.2"}),
        "spec.devices[0].attributes[x].version",
        "semver.org",
    ),
    (
        "attribute-version-length",
        lambda s: s["spec"]["devices"][0]["attributes"].update(x={"version": "1.2.3-" + "a" * 60}),
        "spec.devices[0].attributes[x].version",
        "Too long",
    ),
    (
        "attributes-plus-capacity",
        lambda s: s["spec"]["devices"][0]["attributes"].update(
            {f"a{i}": {"int": i} for i in range(31)}
        ),
        "spec.devices[0]",
        "total number of attributes and capacities must not exceed 32",
    ),
    (
        "capacity-name",
        lambda s: s["spec"]["devices"][0]["capacity"].update({"9lives": {"value": "1"}}),
        "spec.devices[0].capacity",
        "C identifier",
    ),
    (
        "capacity-quantity",
        lambda s: s["spec"]["devices"][0]["capacity"].update(memory={"value": "lots"}),
        "spec.devices[0].capacity[memory].value",
        "valid quantity",
    ),
    # taints (4.5, 4.6)
    (
        "taints-too-many",
        _dev(taints=[{"key": f"k{i}", "effect": "None"} for i in range(17)]),
        "spec.devices[0].taints",
        "Too many: 17: must have at most 16 items",
    ),
    (
        "taint-effect",
        _dev(taints=[{"key": "k", "effect": "Evict"}]),
        "spec.devices[0].taints[0].effect",
        "Unsupported value",
    ),
    (
        "taint-effect-required",
        _dev(taints=[{"key": "k"}]),
        "spec.devices[0].taints[0].effect",
        "Required value",
    ),
    (
        "taint-key",
        _dev(taints=[{"key": "bad key", "effect": "NoSchedule"}]),
        "spec.devices[0].taints[0].key",
        "name part",
    ),
    (
        "taint-value",
        _dev(taints=[{"key": "k", "value": "-x-", "effect": "NoSchedule"}]),
        "spec.devices[0].taints[0].value",
        "valid label",
    ),
    # counter consumption (4.5, 4.6)
    (
        "consumes-too-many",
        _dev(
            consumesCounters=[
                {"counterSet": f"s{i}", "counters": {"mem": {"value": "1"}}} for i in range(3)
            ]
        ),
        "spec.devices[0].consumesCounters",
        "Too many: 3: must have at most 2 items",
    ),
    (
        "consumes-set-name",
        _dev(consumesCounters=[{"counterSet": "Set", "counters": {"mem": {"value": "1"}}}]),
        "spec.devices[0].consumesCounters[0].counterSet",
        "RFC 1123 label",
    ),
    (
        "consumes-counters-required",
        _dev(consumesCounters=[{"counterSet": "s", "counters": {}}]),
        "spec.devices[0].consumesCounters[0].counters",
        "Required value",
    ),
    (
        "consumes-unique-sets",
        _dev(
            consumesCounters=[
                {"counterSet": "s", "counters": {"mem": {"value": "1"}}},
                {"counterSet": "s", "counters": {"cores": {"value": "1"}}},
            ]
        ),
        "spec.devices[0].consumesCounters[1]",
        "Duplicate value",
    ),
    # binding conditions (4.4)
    (
        "binding-too-many",
        _dev(bindingConditions=[f"c{i}" for i in range(5)], bindingFailureConditions=["f"]),
        "spec.devices[0].bindingConditions",
        "Too many: 5: must have at most 4 items",
    ),
    (
        "binding-needs-failures",
        _dev(bindingConditions=["ready"]),
        "spec.devices[0].bindingFailureConditions",
        "required to use bindingConditions",
    ),
    (
        "binding-failures-need-conditions",
        _dev(bindingFailureConditions=["failed"]),
        "spec.devices[0].bindingConditions",
        "required to use bindingFailureConditions",
    ),
    (
        "binding-overlap",
        _dev(bindingConditions=["x"], bindingFailureConditions=["x"]),
        "spec.devices[0].bindingFailureConditions[0]",
        "must not overlap",
    ),
    (
        "binding-duplicates",
        _dev(bindingConditions=["x", "x"], bindingFailureConditions=["f"]),
        "spec.devices[0].bindingConditions[1]",
        "Duplicate value",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "phrase"), [r[1:] for r in RULES], ids=[r[0] for r in RULES]
)
def test_each_rule_names_its_field(mutate, field, phrase):
    obj = _slice()
    mutate(obj)
    errors = validate_slice(obj)
    matching = [e for e in errors if e.field == field and phrase in e.message]
    assert matching, f"no {field!r} error containing {phrase!r} in {[str(e) for e in errors]}"


# --- device limits (4.6) --------------------------------------------------------------------


def test_128_devices_fit_and_129_do_not():
    assert validate_slice(_slice([_device(f"d{i}") for i in range(128)])) == []
    assert _errors(_slice([_device(f"d{i}") for i in range(129)])) == [
        ("spec.devices", "Too many: 129: must have at most 128 items")
    ]


@pytest.mark.parametrize(
    "advanced",
    [
        {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        {"consumesCounters": [{"counterSet": "s", "counters": {"mem": {"value": "1"}}}]},
    ],
)
def test_taints_or_counters_lower_the_limit_to_64(advanced):
    devices = [_device(f"d{i}") for i in range(65)]
    devices[10].update(advanced)
    assert _fields(_slice(devices)) == ["spec.devices"]
    assert validate_slice(_slice(devices[:64])) == []
    assert device_limit(devices) == 64
    assert device_limit([_device()]) == 128


# --- shared counters (4.5, 4.6) --------------------------------------------------------------


def _counter_slice(sets: list[JSON]) -> JSON:
    obj = _slice()
    del obj["spec"]["devices"]
    obj["spec"]["sharedCounters"] = sets
    return obj


def test_counter_sets_rules():
    one = {"name": "gpu-0-set", "counters": {"memory": {"value": "80Gi"}}}
    assert validate_slice(_counter_slice([one])) == []
    many = [{**one, "name": f"s{i}"} for i in range(9)]
    assert _fields(_counter_slice(many)) == ["spec.sharedCounters"]
    assert _fields(_counter_slice([one, one])) == ["spec.sharedCounters[1]"]
    crowded = {"name": "s", "counters": {f"c{i}": {"value": "1"} for i in range(33)}}
    assert _fields(_counter_slice([crowded])) == ["spec.sharedCounters[0].counters"]
    bad_value = {"name": "s", "counters": {"mem": {"value": "1X"}}}
    assert _fields(_counter_slice([bad_value])) == ["spec.sharedCounters[0].counters[mem].value"]


# --- requestPolicy (4.8) ------------------------------------------------------------------

RP = "spec.devices[0].capacity[bandwidth].requestPolicy"

POLICY_RULES: list[tuple[str, JSON, str, str]] = [
    (
        "one-of",
        {"default": "1", "validValues": ["1"], "validRange": {"min": "1"}},
        RP,
        'cannot specify "validValues" and "validRange" at the same time',
    ),
    (
        "default-required-values",
        {"validValues": ["1"]},
        f"{RP}.default",
        "required when validValues is defined",
    ),
    (
        "default-required-range",
        {"validRange": {"min": "1"}},
        f"{RP}.default",
        "required when validRange is defined",
    ),
    (
        "values-ascending",
        {"default": "1", "validValues": ["1", "4", "2"]},
        f"{RP}.validValues[2]",
        "sorted in ascending order",
    ),
    (
        "values-at-most-10",
        {"default": "1", "validValues": [str(i) for i in range(1, 12)]},
        f"{RP}.validValues",
        "Too many: 11: must have at most 10 items",
    ),
    (
        "values-within-capacity",
        {"default": "1", "validValues": ["1", "20G"]},
        f"{RP}.validValues[1]",
        "option is larger than capacity value: 10G",
    ),
    (
        "values-unique-by-written-decimal",
        {"default": "1", "validValues": ["1", "1000m", "1500m", "2", "2e0"]},
        f"{RP}.validValues[4]",
        "Duplicate value",
    ),
    (
        "default-in-values",
        {"default": "3", "validValues": ["1", "2"]},
        f"{RP}.validValues",
        "default value is not valid according to the requestPolicy",
    ),
    (
        "min-required",
        {"default": "1", "validRange": {"max": "5"}},
        f"{RP}.validRange.min",
        "required when validRange is defined",
    ),
    (
        "min-within-capacity",
        {"default": "20G", "validRange": {"min": "20G"}},
        f"{RP}.validRange.min",
        "min is larger than capacity value",
    ),
    (
        "default-at-least-min",
        {"default": "1", "validRange": {"min": "2"}},
        f"{RP}.validRange.default",
        "default is less than min",
    ),
    (
        "min-at-most-max",
        {"default": "5", "validRange": {"min": "5", "max": "4"}},
        f"{RP}.validRange.max",
        "min is larger than max",
    ),
    (
        "max-within-capacity",
        {"default": "1", "validRange": {"min": "1", "max": "20G"}},
        f"{RP}.validRange.max",
        "max is larger than capacity value",
    ),
    (
        "default-at-most-max",
        {"default": "6", "validRange": {"min": "1", "max": "5"}},
        f"{RP}.validRange.default",
        "default is more than max",
    ),
    (
        "step-positive",
        {"default": "1", "validRange": {"min": "1", "step": "0"}},
        f"{RP}.validRange.step",
        "must be greater than zero",
    ),
    (
        "step-fits",
        {"default": "1", "validRange": {"min": "1", "step": "10G"}},
        f"{RP}.validRange.step",
        "is larger than capacity value",
    ),
    (
        "default-aligned",
        {"default": "4", "validRange": {"min": "1", "step": "2"}},
        f"{RP}.validRange.step",
        "not a multiple of a given step (2) from (1)",
    ),
    (
        "max-aligned",
        {"default": "3", "validRange": {"min": "1", "max": "8", "step": "2"}},
        f"{RP}.validRange.step",
        "not a multiple of a given step",
    ),
    (
        "default-quantity",
        {"default": "fast", "validRange": {"min": "1"}},
        f"{RP}.default",
        "valid quantity",
    ),
]


@pytest.mark.parametrize(
    ("policy", "field", "phrase"), [r[1:] for r in POLICY_RULES], ids=[r[0] for r in POLICY_RULES]
)
def test_each_request_policy_rule(policy, field, phrase):
    errors = validate_slice(_slice([_shared(policy)]))
    assert any(e.field == field and phrase in e.message for e in errors), [str(e) for e in errors]


def test_request_policy_needs_multiple_allocations():
    device = _shared({"default": "1M", "validRange": {"min": "1M"}})
    del device["allowMultipleAllocations"]
    assert _errors(_slice([device])) == [(RP, "Forbidden: allowMultipleAllocations must be true")]


@pytest.mark.parametrize(
    "policy",
    [
        {"default": "1M", "validRange": {"min": "1M", "step": "8"}},  # the NIC profile
        {"default": "10", "validRange": {"min": "10", "max": "50", "step": "10"}},
        {"default": "1Gi", "validValues": ["1Gi", "2Gi", "4Gi"]},
        {"default": "5"},  # a default alone is allowed
    ],
)
def test_sound_request_policies_pass(policy):
    assert validate_slice(_slice([_shared(policy)])) == []


def test_fractional_steps_are_checked_in_thousandths():
    # 1.37 (DRAFractionalCapacityRange): (3 - 1) is not a multiple of 1.5, 2.5 - 1 is;
    # 1.36 compared rounded-up integers and took 3 (and refused 2.5).
    policy = {"default": "2500m", "validRange": {"min": "1", "step": "1500m"}}
    assert validate_slice(_slice([_shared(policy)])) == []
    policy = {"default": "3", "validRange": {"min": "1", "step": "1500m"}}
    assert _fields(_slice([_shared(policy)])) == [f"{RP}.validRange.step"]


@pytest.mark.parametrize(("policy", "field"), [
    ({"default": "100m", "validRange": {"min": "100m", "step": "500u"}}, "step"),
    ({"default": "1500u", "validRange": {"min": "1m"}}, "default"),
    ({"default": "0", "validRange": {"min": "-1", "step": "1"}}, "min"),
])
def test_amounts_the_server_cannot_count_are_refused(policy, field):
    assert _fields(_slice([_shared(policy)])) == [f"{RP}.validRange.{field}"]


def test_a_gpu_share_of_100m_steps_of_50m_is_valid():
    policy = {"default": "100m", "validRange": {"min": "100m", "max": "900m", "step": "50m"}}
    assert validate_slice(_slice([_shared(policy)])) == []


# --- reuse and robustness --------------------------------------------------------------------


def test_validate_device_uses_the_given_path():
    errors = validate_device(_device("Bad"), "inventory.pools[gpu].devices[7]")
    assert [e.field for e in errors] == ["inventory.pools[gpu].devices[7].name"]
    assert validate_device(_device(), "x") == []


def test_immutable_fields_on_update():
    old = _slice()
    new = copy.deepcopy(old)
    new["spec"]["driver"] = "other.example.com"
    new["spec"]["pool"]["name"] = "other"
    new["spec"]["nodeName"] = "node-2"
    assert [e.field for e in immutable_field_errors(new, old)] == [
        "spec.pool.name",
        "spec.driver",
        "spec.nodeName",
    ]
    changed_devices = copy.deepcopy(old)
    changed_devices["spec"]["devices"].append(_device("gpu-1"))
    assert validate_slice_update(changed_devices, old) == []


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"spec": None},
        {"metadata": {"name": "x"}, "spec": {"devices": "many"}},
        {"metadata": {"name": "x"}, "spec": {"devices": [None, 3, {"attributes": []}]}},
        {"metadata": {"name": "x"}, "spec": {"pool": "p", "devices": [{"capacity": {"x": 5}}]}},
    ],
)
def test_malformed_input_gives_errors_not_exceptions(obj):
    assert validate_slice(obj)


def test_every_field_slice_is_judged_without_crashing():
    fixture = every_field.resource_slice()
    fields = _fields(fixture)
    assert "spec" in fields  # nodeName, nodeSelector, allNodes and perDeviceNodeSelection
    assert "spec.devices[0].name" in fields  # "nameSample" has capitals
    assert f"{RP.replace('bandwidth', 'capacityKey')}" in fields  # validValues + validRange
