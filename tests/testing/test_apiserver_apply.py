"""Server-side apply on resourceclaims/status: entries of `status.devices` (a map list
keyed by driver, device, pool, shareID) are owned per field manager."""

from __future__ import annotations

import json

import pytest

NODE, DRIVER, OTHER = "node-1", "gpu.example.com", "fpga.example.com"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
APPLY = "application/apply-patch+yaml"


def _entry(driver: str, device: str, reason: str = "Prepared") -> dict:
    return {"driver": driver, "pool": NODE, "device": device, "conditions": [{
        "type": "Ready", "status": "True", "reason": reason, "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z"}]}


@pytest.fixture
def claim(raw, make_claim) -> str:
    assert raw("POST", CLAIMS, make_claim())[0] == 201
    results = [{"request": "gpu", "driver": d, "pool": NODE, "device": n}
               for d, n in ((DRIVER, "gpu-0"), (DRIVER, "gpu-1"), (OTHER, "fpga-0"))]
    status = {"status": {"allocation": {"devices": {"results": results}}}}
    code, _, _ = raw("PATCH", f"{CLAIMS}/claim-1/status", status, "application/merge-patch+json")
    assert code == 200
    return f"{CLAIMS}/claim-1/status"


def _apply(raw, path, manager, devices, force=False):
    config = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
              "metadata": {"name": "claim-1"}}
    if devices is not None:
        config["status"] = {"devices": devices}
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return raw("PATCH", path + query, config, APPLY)


def _devices(body):
    return [(e["driver"], e["device"]) for e in body.get("status", {}).get("devices", [])]


def test_each_manager_owns_its_entries_and_omitting_them_removes_only_those(raw, claim):
    assert _apply(raw, claim, OTHER, [_entry(OTHER, "fpga-0")])[0] == 200
    code, body, _ = _apply(raw, claim, DRIVER, [_entry(DRIVER, "gpu-0"), _entry(DRIVER, "gpu-1")])
    assert code == 200
    assert _devices(body) == [(OTHER, "fpga-0"), (DRIVER, "gpu-0"), (DRIVER, "gpu-1")]
    owners = {m["manager"]: m for m in body["metadata"]["managedFields"]}
    assert owners[DRIVER]["operation"] == "Apply" and owners[DRIVER]["subresource"] == "status"
    ours = owners[DRIVER]["fieldsV1"]["f:status"]["f:devices"]
    assert sorted(ours) == [f'k:{{"device":"gpu-{i}","driver":"{DRIVER}","pool":"{NODE}"}}'
                            for i in (0, 1)]
    assert "f:conditions" in ours[sorted(ours)[0]] and "." in ours[sorted(ours)[0]]

    code, body, _ = _apply(raw, claim, DRIVER, [_entry(DRIVER, "gpu-1")])
    assert _devices(body) == [(OTHER, "fpga-0"), (DRIVER, "gpu-1")]
    code, body, _ = _apply(raw, claim, DRIVER, None)
    assert _devices(body) == [(OTHER, "fpga-0")]
    assert [m["manager"] for m in body["metadata"]["managedFields"]] == [OTHER]


def test_a_field_another_manager_owns_conflicts_unless_forced(raw, claim):
    _apply(raw, claim, OTHER, [_entry(OTHER, "fpga-0")])
    code, body, _ = _apply(raw, claim, DRIVER, [_entry(OTHER, "fpga-0", reason="Taken")])
    assert code == 409 and f'conflict with "{OTHER}"' in body["message"]
    assert "status.devices" in body["message"]
    code, body, _ = _apply(raw, claim, DRIVER, [_entry(OTHER, "fpga-0", reason="Taken")], True)
    assert code == 200
    assert body["status"]["devices"][0]["conditions"][0]["reason"] == "Taken"
    # the same value is no conflict: both own it
    assert _apply(raw, claim, OTHER, [_entry(OTHER, "fpga-0", reason="Taken")])[0] == 200


def test_a_no_op_apply_writes_nothing(raw, claim):
    _, first, _ = _apply(raw, claim, DRIVER, [_entry(DRIVER, "gpu-0")])
    _, again, _ = _apply(raw, claim, DRIVER, [_entry(DRIVER, "gpu-0")])
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_entries_written_by_a_merge_patch_are_not_removed_by_an_apply(raw, claim):
    merge = {"status": {"devices": [_entry(OTHER, "fpga-0")]}}
    raw("PATCH", claim, merge, "application/merge-patch+json")
    _apply(raw, claim, DRIVER, [_entry(DRIVER, "gpu-0")])
    _, body, _ = _apply(raw, claim, DRIVER, None)
    assert _devices(body) == [(OTHER, "fpga-0")]


@pytest.mark.parametrize(
    ("query", "config", "code", "message"),
    [
        ("", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}, 400, "fieldManager"),
        ("?fieldManager=x", {"status": {}}, 400, "apiVersion and kind"),
        ("?fieldManager=x", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"uid": "not-this-one"}}, 409, "Precondition failed"),
    ],
)
def test_bad_applies_are_refused(raw, claim, query, config, code, message):
    answer, body, _ = raw("PATCH", claim + query, config, APPLY)
    assert (answer, message in body["message"]) == (code, True), json.dumps(body)
