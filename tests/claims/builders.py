"""Small inventories, claims and CDI checks shared by the claims tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7

from driver.devices.model import Device, Inventory, Pool

DRIVER = "gpu.simdra.example.com"
OTHER_DRIVER = "other.example.com"
GPU_POOL = "node-a"
NIC_POOL = "node-a-nics"
SCHEMA_DIR = Path("/work/shared/reference/cdi-schema")
FIXTURE = Path("/work/shared/reference/api-fixtures/resource.k8s.io.v1.ResourceClaim.json")

SHARE_1 = "11111111-1111-4111-8111-111111111111"
SHARE_2 = "22222222-2222-4222-8222-222222222222"
SHARE_3 = "33333333-3333-4333-8333-333333333333"


def gpu(index: int) -> Device:
    """An exclusive GPU with a device node."""
    return Device(
        spec={
            "name": f"gpu-{index}",
            "attributes": {"type": {"string": "gpu"}, "index": {"int": index}},
            "capacity": {"memory": {"value": "80Gi"}},
        },
        container_edits={"deviceNodes": [{"path": f"/dev/simdra/gpu{index}"}]},
    )


def nic(index: int) -> Device:
    """A NIC whose 10G of bandwidth many claims share."""
    return Device(
        spec={
            "name": f"nic-{index}",
            "allowMultipleAllocations": True,
            "attributes": {"type": {"string": "nic"}},
            "capacity": {
                "bandwidth": {
                    "value": "10G",
                    "requestPolicy": {"default": "1M", "validRange": {"min": "1M", "step": "8"}},
                }
            },
        },
    )


def inventory(gpus: int = 2, nics: int = 1) -> Inventory:
    """One GPU pool and one NIC pool."""
    return Inventory(
        pools=(
            Pool(GPU_POOL, tuple(gpu(i) for i in range(gpus))),
            Pool(NIC_POOL, tuple(nic(i) for i in range(nics))),
        )
    )


def result(
    request: str,
    device: str,
    pool: str | None = None,
    *,
    share: str | None = None,
    consumed: dict[str, str] | None = None,
    admin: bool | None = None,
    driver: str = DRIVER,
) -> dict[str, Any]:
    """One allocation result as the API writes it."""
    entry: dict[str, Any] = {
        "request": request,
        "driver": driver,
        "pool": pool or (NIC_POOL if device.startswith("nic") else GPU_POOL),
        "device": device,
    }
    if share is not None:
        entry["shareID"] = share
    if consumed is not None:
        entry["consumedCapacity"] = consumed
    if admin is not None:
        entry["adminAccess"] = admin
    return entry


def claim(
    uid: str,
    results: list[dict[str, Any]],
    *,
    name: str | None = None,
    namespace: str = "default",
    config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An allocated ResourceClaim (resource.k8s.io/v1 JSON)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name or f"claim-{uid[:8]}", "uid": uid},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results, "config": config or []}}},
    }


def fixture_claim() -> dict[str, Any]:
    """The upstream round-trip fixture: every v1 field set to a placeholder."""
    return json.loads(FIXTURE.read_text())


def _cdi_validator() -> Draft7Validator:
    schema = json.loads((SCHEMA_DIR / "schema.json").read_text())
    defs = json.loads((SCHEMA_DIR / "defs.json").read_text())
    # schema.json has no $id, so its relative "defs.json#/..." refs resolve to "defs.json".
    registry = Registry().with_resource("defs.json", DRAFT7.create_resource(defs))
    return Draft7Validator(schema, registry=registry)


CDI_VALIDATOR = _cdi_validator()
_VENDOR_OR_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_EDIT_KEYS = {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def assert_valid_cdi_spec(spec: dict[str, Any]) -> None:
    """What a container runtime's CDI library checks: the JSON schema, the name rules,
    non-empty device edits, NAME=VALUE env, and features not newer than cdiVersion."""
    errors = sorted(CDI_VALIDATOR.iter_errors(spec), key=str)
    assert not errors, [e.message for e in errors]
    version = _version(spec["cdiVersion"])
    vendor, _, cdi_class = spec["kind"].partition("/")
    assert _VENDOR_OR_CLASS.match(vendor) and _VENDOR_OR_CLASS.match(cdi_class), spec["kind"]
    names = [d["name"] for d in spec["devices"]]
    assert len(names) == len(set(names)), f"duplicate CDI device names {names}"
    for device in spec["devices"]:
        assert _DEVICE_NAME.match(device["name"]), device["name"]
        if device["name"][0].isdigit():
            assert version >= (0, 5, 0)
        edits = device["containerEdits"]
        assert set(edits) <= _EDIT_KEYS
        assert any(edits.get(k) for k in _EDIT_KEYS), f"empty edits for {device['name']}"
        for entry in edits.get("env", []):
            name, sep, _ = entry.partition("=")
            assert sep and name, entry
        if any(n.get("hostPath") for n in edits.get("deviceNodes", [])):
            assert version >= (0, 5, 0)
        if edits.get("netDevices"):
            assert version >= (1, 1, 0)
        if edits.get("additionalGids"):
            assert version >= (0, 7, 0)
