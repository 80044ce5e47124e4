"""PreparedClaim <-> JSON (pure): the payload of a checkpoint record.

Everything prepare computed is stored as computed, answer included, so that a prepare
of an already prepared claim returns the very same answer even if the inventory or this
code changed in between. Exact amounts are stored as Fraction strings ("10000000",
"1/3"), never floats.

This is the payload of format 2: every field is required, fields it does not know are
ignored (a newer driver's additions). Older payloads are upgraded to it before they get
here (`simdra._driver.claims.record_format`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from simdra._driver.claims.plan import PreparedClaim, PreparedUnit
from simdra._driver.claims.types import ClaimRef, PreparedDevice, PrepareResult

# deviceMetadata.mount: the spec mounts each request's directory (records without it
# mount the file).
DIRECTORY_MOUNT = "directory"


class RecordError(ValueError):
    """A record payload that does not describe a prepared claim."""


def to_payload(claim: PreparedClaim) -> dict[str, Any]:
    """The JSON form of a prepared claim."""
    return {
        "claim": {
            "namespace": claim.claim.namespace,
            "name": claim.claim.name,
            "uid": claim.claim.uid,
        },
        "units": [_unit_to_json(u) for u in claim.units],
        "cdiFile": claim.cdi_file,
        "cdiSpec": claim.cdi_spec,
        "result": {"devices": [_device_to_json(d) for d in claim.result.devices]},
        # format 3 on; null: device metadata was off when the claim was prepared
        "deviceMetadata": None if claim.metadata_root is None else {
            "root": claim.metadata_root, "podClaimName": claim.pod_claim_name,
            **({"mount": DIRECTORY_MOUNT} if claim.metadata_dir_mount else {})},
    }


def from_payload(payload: Any) -> PreparedClaim:
    """Read a payload written by `to_payload`; RecordError says what is wrong."""
    try:
        claim = payload["claim"]
        return PreparedClaim(
            claim=ClaimRef(_str(claim["namespace"]), _str(claim["name"]), _str(claim["uid"])),
            units=tuple(_unit_from_json(u) for u in payload["units"]),
            cdi_file=_str(payload["cdiFile"]),
            cdi_spec=_dict(payload["cdiSpec"]),
            result=PrepareResult(
                devices=tuple(_device_from_json(d) for d in payload["result"]["devices"])
            ),
            **_metadata_from_json(payload.get("deviceMetadata")),
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise RecordError(f"malformed payload: {type(exc).__name__}: {exc}") from None


def _metadata_from_json(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    pod_claim = raw["podClaimName"]
    mount = raw.get("mount")  # absent: prepared before directory mounts
    if mount not in (None, DIRECTORY_MOUNT):
        raise ValueError(f"deviceMetadata.mount {mount!r} is not {DIRECTORY_MOUNT!r}")
    return {"metadata_root": _str(raw["root"]),
            "pod_claim_name": None if pod_claim is None else _str(pod_claim),
            "metadata_dir_mount": mount == DIRECTORY_MOUNT}


def _unit_to_json(unit: PreparedUnit) -> dict[str, Any]:
    return {
        "pool": unit.pool,
        "device": unit.device,
        "shareID": unit.share_id,
        "requests": list(unit.requests),
        "exclusive": unit.exclusive,
        "adminAccess": unit.admin_access,
        "consumedCapacity": _amounts_to_json(unit.consumed_capacity),
        "deviceCapacity": _amounts_to_json(unit.device_capacity),
        "cdiName": unit.cdi_name,
        "cdiID": unit.cdi_id,
        "env": list(unit.env),
        "deviceType": unit.device_type,
        "attributes": dict(unit.attributes),
        "consumesCounters": _sets_to_json(unit.consumes_counters),
        "counterTotals": _sets_to_json(unit.counter_totals),
        "config": dict(unit.config),
        # Only where a device declares groups, so that other records stay as format 3
        # wrote them; a reader that does not know the key ignores it.
        **({"counterGroups": {n: list(g) for n, g in unit.counter_groups.items()}}
           if unit.counter_groups else {}),
    }


def _unit_from_json(raw: dict[str, Any]) -> PreparedUnit:
    return PreparedUnit(
        pool=_str(raw["pool"]),
        device=_str(raw["device"]),
        share_id=None if raw["shareID"] is None else _str(raw["shareID"]),
        requests=tuple(_str(r) for r in raw["requests"]),
        exclusive=_bool(raw["exclusive"]),
        admin_access=_bool(raw["adminAccess"]),
        consumed_capacity=_amounts_from_json(raw["consumedCapacity"]),
        device_capacity=_amounts_from_json(raw["deviceCapacity"]),
        cdi_name=_str(raw["cdiName"]),
        cdi_id=_str(raw["cdiID"]),
        env=tuple(_str(e) for e in raw["env"]),
        device_type=_str(raw["deviceType"]),
        attributes=_dict(raw["attributes"]),
        consumes_counters=_sets_from_json(raw["consumesCounters"]),
        counter_totals=_sets_from_json(raw["counterTotals"]),
        config=_dict(raw["config"]),
        counter_groups={_str(n): tuple(_str(g) for g in groups)
                        for n, groups in _dict(raw.get("counterGroups") or {}).items()},
    )


def _device_to_json(device: PreparedDevice) -> dict[str, Any]:
    return {
        "requestNames": list(device.request_names),
        "poolName": device.pool_name,
        "deviceName": device.device_name,
        "cdiDeviceIDs": list(device.cdi_device_ids),
        "shareID": device.share_id,
    }


def _device_from_json(raw: dict[str, Any]) -> PreparedDevice:
    return PreparedDevice(
        request_names=tuple(_str(r) for r in raw["requestNames"]),
        pool_name=_str(raw["poolName"]),
        device_name=_str(raw["deviceName"]),
        cdi_device_ids=tuple(_str(i) for i in raw["cdiDeviceIDs"]),
        share_id=None if raw["shareID"] is None else _str(raw["shareID"]),
    )


def _amounts_to_json(amounts: Any) -> dict[str, str]:
    return {name: str(Fraction(value)) for name, value in amounts.items()}


def _amounts_from_json(raw: Any) -> dict[str, Fraction]:
    return {_str(name): Fraction(_str(value)) for name, value in _dict(raw).items()}


def _sets_to_json(sets: Any) -> dict[str, dict[str, str]]:
    return {name: _amounts_to_json(amounts) for name, amounts in sets.items()}


def _sets_from_json(raw: Any) -> dict[str, dict[str, Fraction]]:
    return {_str(name): _amounts_from_json(amounts) for name, amounts in _dict(raw).items()}


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected a boolean, got {value!r}")
    return value


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value
