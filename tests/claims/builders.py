"""Small inventories, claims and CDI checks shared by the claims tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from simdra._driver.builtins import builtin_kinds
from simdra._driver.claims.plan.config import ClaimRules, rules_for
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.devices.profiles import profile_inventory
from simdra._driver.slices.desired import desired_pool
from simdra._driver.testing.allocation.builders import claim as builder_claim
from simdra._driver.testing.allocation.builders import (
    device_class,
    exactly,
    resource_slice,
    selector,
)
from simdra._driver.testing.scheduler import allocate
from tests.fixtures import cdi_schema, every_field

# The rules of simdra's own kinds, as `simdra run` hands them down to its Preparer.
RULES: ClaimRules = rules_for(builtin_kinds())

DRIVER = "gpu.simdra.example.com"
OTHER_DRIVER = "other.example.com"
GPU_POOL = "node-a"
NIC_POOL = "node-a-nics"

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
    """A claim with every v1 field set to a placeholder (tests/fixtures/every_field.py)."""
    return every_field.resource_claim()


def _cdi_validator() -> Draft7Validator:
    Draft7Validator.check_schema(cdi_schema.SPEC)
    return Draft7Validator(cdi_schema.SPEC)


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


# --- opaque config -------------------------------------------------------------------

CONFIG_API = "simdra.dra.example.com/v1alpha1"


def gpu_config(**fields: Any) -> dict[str, Any]:
    """GpuConfig parameters."""
    return {"apiVersion": CONFIG_API, "kind": "GpuConfig", **fields}


def nic_config(**fields: Any) -> dict[str, Any]:
    """NicConfig parameters."""
    return {"apiVersion": CONFIG_API, "kind": "NicConfig", **fields}


def config_entry(
    parameters: Any,
    *,
    source: str = "FromClaim",
    requests: list[str] | None = None,
    driver: str = DRIVER,
) -> dict[str, Any]:
    """One `status.allocation.devices.config[]` entry."""
    entry: dict[str, Any] = {"source": source, "opaque": {"driver": driver}}
    if parameters is not None:
        entry["opaque"]["parameters"] = parameters
    if requests is not None:
        entry["requests"] = requests
    return entry


# --- a node publishing a built-in profile, and the scheduler stand-in ------------------

NODE = "node-a"
ATTR = f'device.attributes["{DRIVER}"]'


def profile_slices(inventory: Inventory, node: str = NODE) -> list[dict[str, Any]]:
    """The ResourceSlices the publisher makes of `inventory` (counter slices separate)."""
    slices = []
    for pool in inventory.pools:
        desired = desired_pool(pool)
        for index, content in enumerate(desired.slices):
            slices.append(
                resource_slice(
                    DRIVER,
                    [dict(d) for d in content.devices],
                    pool=pool.name,
                    node=node,
                    count=len(desired.slices),
                    name=f"{node}-{pool.name}-{index}",
                    shared_counters=[dict(c) for c in content.shared_counters],
                )
            )
    return slices


class ProfileCluster:
    """A node with a built-in profile, its slices, and claims allocated by the allocator
    (fresh random shareIDs, consumedCapacity for every capacity) into a claim source."""

    def __init__(self, profile: str, count: int = 1) -> None:
        self.inventory = profile_inventory(profile, DRIVER, NODE, count, kinds=builtin_kinds())
        self.slices = profile_slices(self.inventory)
        self.classes = {
            name: device_class(name, DRIVER, selectors=(f'{ATTR}.type == "{name}"',))
            for name in builtin_kinds().names()  # classes named by the kind alone
        }
        self.source = StaticClaimSource()
        self.allocated: dict[str, dict[str, Any]] = {}

    def allocate(
        self,
        name: str,
        *requests: dict[str, Any],
        config: list[dict[str, Any]] | None = None,
        namespace: str = "default",
    ) -> ClaimRef:
        """Allocate a claim next to every claim allocated so far; store it in the source."""
        raw = builder_claim(name, *requests, namespace=namespace, config=config)
        raw["status"] = {
            "allocation": allocate(
                raw, self.slices, self.classes, self.allocated.values(), node_name=NODE
            )
        }
        return self.put(raw)

    def put(self, raw: dict[str, Any]) -> ClaimRef:
        """Store an (allocated or forged) claim."""
        self.source.put(raw)
        meta = raw["metadata"]
        self.allocated[meta["uid"]] = raw
        return ClaimRef(meta["namespace"], meta["name"], meta["uid"])

    def forget(self, ref: ClaimRef) -> None:
        """The claim was deallocated: its devices are free for the allocator again."""
        self.allocated.pop(ref.uid, None)
        self.source.claims.pop((ref.namespace, ref.name), None)

    def results(self, ref: ClaimRef) -> list[dict[str, Any]]:
        """The allocation results of a stored claim."""
        return self.allocated[ref.uid]["status"]["allocation"]["devices"]["results"]

    def preparer(self, tmp_path: Path, **kwargs: Any) -> Preparer:
        """A (re)started preparer over `tmp_path`'s cdi and data directories, with the
        rules of simdra's kinds unless `rules` is given."""
        return Preparer(DRIVER, self.source, lambda: self.inventory, tmp_path / "cdi",
                        tmp_path / "data", **{"rules": RULES, **kwargs})


def request(name: str, device_class_name: str, **fields: Any) -> dict[str, Any]:
    """A claim request (`exactly`)."""
    return exactly(name, device_class_name, **fields)


def wants(name: str, device_class_name: str, **amounts: str) -> dict[str, Any]:
    """A request for one share with `capacity.requests` amounts."""
    return exactly(name, device_class_name, capacity={"requests": dict(amounts)})


def with_profile(name: str, profile: str) -> dict[str, Any]:
    """A GPU request for one partition of `profile` (e.g. "3g.40gb")."""
    return exactly(name, "gpu", selectors=[selector(f'{ATTR}.profile == "{profile}"')])


def env_of(spec: dict[str, Any], device_name: str) -> dict[str, str]:
    """A CDI device's env as KEY -> value, its `SIMDRA_DEVICE_<ID>_` prefix removed."""
    (device,) = [d for d in spec["devices"] if d["name"] == device_name]
    env = {}
    for entry in device["containerEdits"]["env"]:
        name, _, value = entry.partition("=")
        match = ENV_NAME.match(name)
        assert match, name
        env[match["key"]] = value
    return env


ENV_NAME = re.compile(r"^SIMDRA_DEVICE_(?P<id>[0-9A-F]{8})_(?P<key>[A-Z0-9_]+)$")
