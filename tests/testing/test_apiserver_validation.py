"""Writes the real API server rejects are rejected here too: 422 Invalid naming the field."""

from __future__ import annotations

import copy
import http.client
import json
from typing import Any

import kubernetes_validate
import pytest
from kubernetes.client.exceptions import ApiException

from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.apiserver.schema import schema_errors
from tests.fixtures import every_field

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


def _fields(body: dict) -> list[str]:
    return [c["field"] for c in body["details"]["causes"]]


def _assert_invalid(code: int, body: dict) -> None:
    assert code == 422
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["reason"] == "Invalid" and body["code"] == 422


def test_unknown_field_is_rejected_with_its_path(raw, make_slice):
    body = make_slice()
    body["spec"]["devices"][0]["bogus"] = True
    code, status, _ = raw("POST", SLICES, body)
    _assert_invalid(code, status)
    assert _fields(status) == ["spec.devices[0].bogus"]
    assert 'unknown field "spec.devices[0].bogus"' in status["message"]
    assert status["message"].startswith('ResourceSlice.resource.k8s.io "node-1-gpu.example.com-')


def test_wrong_type_and_missing_required_field(raw, make_slice):
    body = make_slice()
    body["spec"]["devices"][0]["attributes"]["index"] = {"int": "zero"}
    del body["spec"]["driver"]
    code, status, _ = raw("POST", SLICES, body)
    _assert_invalid(code, status)
    assert sorted(_fields(status)) == ["spec.devices[0].attributes[index].int", "spec.driver"]


def test_too_many_devices(resource_api, make_slice, make_device):
    body = make_slice(devices=[make_device(f"gpu-{i}") for i in range(129)])
    with pytest.raises(ApiException) as err:
        resource_api.create_resource_slice(body)
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert _fields(status) == ["spec.devices"]
    assert "Too many: 129: must have at most 128 items" in status["message"]


def test_128_devices_are_accepted(resource_api, make_slice, make_device):
    body = make_slice(devices=[make_device(f"gpu-{i}") for i in range(128)])
    assert len(resource_api.create_resource_slice(body).spec.devices) == 128


def test_duplicate_device_names(resource_api, make_slice, make_device):
    body = make_slice(devices=[make_device("gpu-0"), make_device("gpu-1"), make_device("gpu-0")])
    with pytest.raises(ApiException) as err:
        resource_api.create_resource_slice(body)
    status = json.loads(err.value.body)
    assert err.value.status == 422
    assert _fields(status) == ["spec.devices[2]"]
    assert status["details"]["causes"][0]["reason"] == "FieldValueDuplicate"


def test_bad_request_policy(resource_api, make_slice, make_device):
    shared = make_device("nic-0", allowMultipleAllocations=True)
    shared["capacity"] = {
        "bandwidth": {
            "value": "10G",
            "requestPolicy": {"default": "2", "validRange": {"min": "1", "step": "2"}},
        }
    }
    exclusive = make_device("nic-1")
    exclusive["capacity"] = {"bandwidth": {"value": "10G", "requestPolicy": {"default": "1"}}}
    with pytest.raises(ApiException) as err:
        resource_api.create_resource_slice(make_slice(devices=[shared, exclusive]))
    status = json.loads(err.value.body)
    assert _fields(status) == [
        "spec.devices[0].capacity[bandwidth].requestPolicy.validRange.step",
        "spec.devices[1].capacity[bandwidth].requestPolicy",
    ]
    assert "allowMultipleAllocations must be true" in status["message"]


def test_update_is_validated_and_immutable_fields_stay(resource_api, make_slice, make_device):
    created = resource_api.create_resource_slice(make_slice())
    created.spec.driver = "other.example.com"
    created.spec.devices[0].name = "GPU_0"
    with pytest.raises(ApiException) as err:
        resource_api.replace_resource_slice(created.metadata.name, created)
    assert err.value.status == 422
    assert sorted(_fields(json.loads(err.value.body))) == ["spec.devices[0].name", "spec.driver"]


def test_claim_with_unknown_field_is_rejected(raw, make_claim):
    body = make_claim()
    body["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    body["spec"]["extra"] = 1
    code, status, _ = raw("POST", CLAIMS, body)
    _assert_invalid(code, status)
    assert sorted(_fields(status)) == ["spec.devices.requests[0].exactly.count", "spec.extra"]


def test_every_field_slice_is_refused_by_a_1_35_server():
    """The fixture sets every field of the newest API, with placeholder values: a 1.35
    server does not know the 1.36+/1.37 fields, and the placeholders break name rules."""
    fixture = every_field.resource_slice()
    fixture["metadata"] = {"name": "fixture"}
    with APIServer(kubernetes_version="1.35") as server:
        code, status = _post(server, SLICES, fixture)
    _assert_invalid(code, status)
    assert "spec.partitionTypeAttribute" in _fields(status)
    assert "spec.skipNodeOperations" in _fields(status)


def test_every_field_slice_minus_newer_fields_fails_semantic_rules(raw):
    fixture = every_field.resource_slice()
    fixture["metadata"] = {"name": "fixture"}
    for field in ("partitionTypeAttribute", "skipNodeOperations"):
        del fixture["spec"][field]
    device = fixture["spec"]["devices"][0]
    del device["nodeAllocatableResources"]
    for key in ("ints", "bools", "strings", "versions"):
        del device["attributes"]["attributeKey"][key]
    code, status, _ = raw("POST", SLICES, fixture)
    _assert_invalid(code, status)
    fields = _fields(status)
    assert "spec" in fields  # several node selection fields at once
    assert "spec.devices[0].name" in fields  # "nameSample" is not a DNS label


def _post(server: APIServer, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


# --- the compiled schema agrees with kubernetes_validate ----------------------------------


def _variants(make_slice, make_device) -> list[dict]:
    good = make_slice()
    good["metadata"]["name"] = "s"
    variants = [good]
    for mutate in (
        lambda s: s["spec"]["devices"][0].update(bogus=1),
        lambda s: s["spec"].pop("pool"),
        lambda s: s["spec"]["pool"].update(generation="1"),
        lambda s: s["spec"]["devices"][0]["capacity"]["memory"].update(value={}),
        lambda s: s["spec"]["devices"][0]["capacity"]["memory"].update(value=5),
        lambda s: s["spec"]["devices"][0].update(taints=[{"key": "k", "effect": "NoSchedule"}]),
        lambda s: s["spec"].update(allNodes="true"),
        lambda s: s["metadata"].update(labels={"a": 1}),
    ):
        variant = copy.deepcopy(good)
        mutate(variant)
        variants.append(variant)
    return variants


def test_schema_matches_kubernetes_validate(make_slice, make_device):
    for variant in _variants(make_slice, make_device):
        try:
            kubernetes_validate.validate(variant, "1.35", strict=True)
            reference_ok = True
        except kubernetes_validate.ValidationError:
            reference_ok = False
        assert (schema_errors(variant) == []) == reference_ok, variant


CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def _device_class(expression: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def test_device_class_update_compiles_a_changed_selector(raw):
    code, created, _ = raw("POST", CLASSES, _device_class('device.driver == "gpu.example.com"'))
    assert code == 201
    created["metadata"]["labels"] = {"team": "a"}
    code, updated, _ = raw("PUT", f"{CLASSES}/gpu.example.com", created)
    assert code == 200, updated
    updated["spec"]["selectors"][0]["cel"]["expression"] = "device.driver"
    code, status, _ = raw("PUT", f"{CLASSES}/gpu.example.com", updated)
    _assert_invalid(code, status)
    assert _fields(status) == ["spec.selectors[0].cel.expression"]
    assert "must evaluate to bool or the unknown type, not string" in status["message"]


def test_undecodable_quantity_is_a_bad_request_also_on_update(raw, make_slice):
    code, created, _ = raw("POST", SLICES, make_slice())
    assert code == 201
    created["spec"]["devices"][0]["capacity"]["memory"]["value"] = "lots"
    code, status, _ = raw("PUT", f"{SLICES}/{created['metadata']['name']}", created)
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith(
        'ResourceSlice in version "v1" cannot be handled as a ResourceSlice: quantities must'
    )


def test_claim_spec_rules_apply_on_create_only(raw, make_claim):
    """The spec of a stored claim cannot change, so an update reports only that."""
    body = make_claim()
    code, created, _ = raw("POST", CLAIMS, body)
    assert code == 201
    created["spec"]["devices"]["requests"][0]["name"] = "Not_A_Label"
    name = created["metadata"]["name"]
    code, status, _ = raw("PUT", f"{CLAIMS}/{name}", created)
    _assert_invalid(code, status)
    assert _fields(status) == ["spec"]
