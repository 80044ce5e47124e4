"""The envelope of a checkpoint record and its format versions (pure).

A record file is one line of canonical JSON (keys sorted, compact, ASCII):

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
from typing import Any, TypeGuard

from simdra._driver.claims.plan import PreparedClaim
from simdra._driver.claims.record import RecordError, from_payload, to_payload
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
