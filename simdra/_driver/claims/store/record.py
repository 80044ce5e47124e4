"""A checkpoint record (pure): its payload, PreparedClaim <-> JSON, and the envelope
around it with its format versions.

The payload: everything prepare computed is stored as computed, answer included, so that
a prepare of an already prepared claim returns the very same answer even if the
inventory or this code changed in between. Exact amounts are stored as Fraction strings
("10000000", "1/3"), never floats. This is the payload of format 2: every field is
required, fields it does not know are ignored (a newer driver's additions). Older
payloads are upgraded to it before they are read (`_UPGRADES`).

The envelope: a record file is one line of canonical JSON (keys sorted, compact, ASCII):

    {"checksum":"sha256:…","compatVersion":2,"kind":"simdra.ClaimRecord",
     "payload":{…},"version":2}

* `version`: the format the writer wrote (its FORMAT_VERSION).
* `compatVersion`: the oldest format whose readers understand the record. A later
  format that only adds fields older readers may ignore keeps it; one they would
  misread raises it.
* `checksum`: sha256 of the canonical JSON of the record without `checksum`, so a
  torn or edited record is detected, its version fields included. Every format from 2
  on keeps this rule and these three fields: that is what lets a reader judge a record
  of a format it has never seen.

Reading (`decode_record`), by the record's format:

* 1 (simdra 0.1.0: no `compatVersion`, checksum of the payload alone): verified as
  written, then upgraded in memory (`_UPGRADES`). The file is left as it is, never
  rewritten on read: reading stays read-only (`simdra usage` and a rolling update's
  other instance read the same files), and a driver rolled back to format 1 still
  reads it. It goes when the claim is unprepared.
* 2 (simdra before device metadata): read as format 3 without it; format 3 only
  added `deviceMetadata`, so it keeps compatVersion 2 and format 2 readers read it.
  A unit's `counterGroups` (compatibility groups, Kubernetes 1.37) is optional within
  format 3: written only for devices that declare groups, absent means none, and a
  reader that does not know it ignores it.
* FORMAT_VERSION, or a later one whose `compatVersion` is at most FORMAT_VERSION:
  read; fields this driver does not know are ignored.
* a later one that needs a newer reader: IncompatibleRecord, naming the versions. The
  caller keeps it like a corrupt record (on disk, its devices reserved): nothing lost,
  and a driver that reads it finds it as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeGuard

from simdra._driver.claims.plan.prepared import PreparedClaim, PreparedUnit
from simdra._driver.claims.types import ClaimRef, PreparedDevice, PrepareResult
from simdra._driver.core.textlimits import JsonLimitError, clip, json_depth, load_json

RECORD_KIND = "simdra.ClaimRecord"
FORMAT_VERSION = 3  # what this driver writes
COMPAT_VERSION = 2  # the oldest format that reads what this driver writes
OLDEST_READ = 1  # the oldest format this driver reads (upgrading it in memory)
# Far above any record prepare writes (a claim of 32 devices with their attributes, CDI
# edits and config is tens of KiB, nested about 10 levels), and enforced when writing
# too, so a record this driver wrote is never refused when read back.
MAX_RECORD_BYTES = 4 * 2**20
MAX_RECORD_DEPTH = 32

# Unit fields format 1 writers could leave out (added while format 1 shipped), with
# the value that means what their absence meant; format 2 requires them.
_V1_UNIT_DEFAULTS: dict[str, Any] = {
    "deviceType": "device",
    "attributes": {},
    "consumesCounters": {},
    "counterTotals": {},
    "config": {},
}


class IncompatibleRecord(ValueError):
    """A well-formed record of a format this driver cannot read (a newer driver's)."""


def _upgrade_v1(payload: Any) -> Any:
    """A format 1 payload as format 2 has it: every unit field present."""
    if not isinstance(payload, dict) or not isinstance(payload.get("units"), list):
        return payload  # from_payload says what is wrong
    units = [{**_V1_UNIT_DEFAULTS, **u} if isinstance(u, dict) else u for u in payload["units"]]
    return {**payload, "units": units}


def _upgrade_v2(payload: Any) -> Any:
    """A format 2 payload as format 3 has it: no device metadata (the feature came with
    format 3, which only adds `deviceMetadata`, so format 2 readers read it too)."""
    return {**payload, "deviceMetadata": None} if isinstance(payload, dict) else payload


# format N -> the function that turns its payload into format N+1's
_UPGRADES: dict[int, Callable[[Any], Any]] = {1: _upgrade_v1, 2: _upgrade_v2}


def encode_record(claim: PreparedClaim) -> bytes:
    """The bytes of a claim's record file, in format FORMAT_VERSION."""
    payload = to_payload(claim)
    # The payload's canonical text is spliced in rather than the record encoded as a
    # whole: the same bytes, without encoding the payload twice.
    body = (f'{{"compatVersion":{COMPAT_VERSION},"kind":{json.dumps(RECORD_KIND)},'
            f'"payload":{_canonical(payload)},"version":{FORMAT_VERSION}}}')
    data = f'{{"checksum":{json.dumps(_digest(body))},{body[1:]}\n'.encode()
    # Refused here, so that no record is written that reading would refuse. The depth
    # comes from the text (a regex pass in C), not from walking the payload in Python.
    depth = json_depth(data)
    if len(data) > MAX_RECORD_BYTES or depth > MAX_RECORD_DEPTH:
        raise ValueError(
            f"the checkpoint record of claim {claim.claim.uid} would be {len(data)} bytes "
            f"nested {depth} levels; the limits are {MAX_RECORD_BYTES} bytes and "
            f"{MAX_RECORD_DEPTH} levels"
        )
    return data


def decode_record(data: bytes, uid: str) -> PreparedClaim:
    """Read a record file's bytes; IncompatibleRecord for a format this driver cannot
    read, ValueError for anything else that makes them untrustworthy."""
    try:
        record = load_json(data, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_RECORD_DEPTH)
    except JsonLimitError as exc:
        raise ValueError(f"refused: {exc}") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    version, compat = _versions(record)
    if record.get("checksum") != record_checksum(record):
        raise ValueError("checksum mismatch: the record was truncated or changed")
    if compat > FORMAT_VERSION:
        raise IncompatibleRecord(
            f"record format version {version} needs a driver that reads "
            f"format {compat} or later; this driver reads formats {OLDEST_READ} to "
            f"{FORMAT_VERSION}"
        )
    payload = record.get("payload")
    for step in range(version, FORMAT_VERSION):
        payload = _UPGRADES[step](payload)
    try:
        claim = from_payload(payload)
    except RecordError as exc:
        raise ValueError(f"format version {version}: {exc}") from None
    if claim.claim.uid != uid:
        raise ValueError(
            f"holds claim uid {clip(repr(claim.claim.uid))} but is named for uid {uid!r}"
        )
    return claim


def record_checksum(record: dict[str, Any]) -> str:
    """The checksum a record of its format must carry (format 1: of the payload)."""
    if record.get("version") == 1:
        return _digest(_canonical(record.get("payload")))
    return _digest(_canonical({k: v for k, v in record.items() if k != "checksum"}))


def _versions(record: dict[str, Any]) -> tuple[int, int]:
    """(version, compatVersion) of a record of this kind; ValueError when not readable as
    one."""
    kind, version = record.get("kind"), record.get("version")
    # format 1 had no compatVersion: only format 1 readers read it
    compat = record.get("compatVersion", 1 if version == 1 else None)
    if (
        kind == RECORD_KIND
        and _is_version(version)
        and _is_version(compat)
        and OLDEST_READ <= compat <= version
    ):
        return version, compat
    raise ValueError(
        f"format {clip(repr(kind))} version {clip(repr(version))} compatVersion "
        f"{clip(repr(compat))}; this driver reads {RECORD_KIND!r} versions "
        f"{OLDEST_READ} to {FORMAT_VERSION} (and later ones with compatVersion at most "
        f"{FORMAT_VERSION})"
    )


def _is_version(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _canonical(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(canonical: str) -> str:
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


# --- the payload ------------------------------------------------------------

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
