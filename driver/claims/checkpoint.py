"""Durable per-claim records: `<data dir>/claims/<uid>.json`, one file per claim.

One file per claim means prepare and unprepare of different claims never rewrite each
other's state, and a corrupt file costs one claim, not the node. Each record is
self-describing (format version, claim identity, what was prepared, the CDI file and its
full content, the answer) and carries a sha256 checksum of its payload, so a torn or
tampered record is detected instead of trusted. Corrupt records are reported and kept;
only an unprepare of that claim moves one aside (`<uid>.json.corrupt`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driver.atomicfile import (
    TEMP_SUFFIX,
    check_safe_name,
    remove_durable,
    rename_durable,
    safe_child,
    write_atomic,
)
from driver.claims.plan import PreparedClaim
from driver.claims.record import RecordError, from_payload, to_payload

FORMAT_VERSION = 1
RECORD_KIND = "simdra.ClaimRecord"
RECORD_SUFFIX = ".json"
CORRUPT_SUFFIX = ".corrupt"


@dataclass(frozen=True)
class CorruptRecord:
    """A record file that could not be trusted, and why."""

    uid: str  # from the file name
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"checkpoint record {self.path} (claim uid {self.uid}): {self.reason}"


class Checkpoint:
    """The claim records in one data directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.directory = records_directory(data_dir)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, claim_uid: str) -> Path:
        """The record path of a claim; ValueError when the UID is not a safe file name."""
        return safe_child(self.directory, f"{claim_uid}{RECORD_SUFFIX}")

    def save(self, claim: PreparedClaim) -> None:
        """Write (or replace) the record of `claim`, atomically and durably."""
        write_atomic(self.path_for(claim.claim.uid), encode_record(claim))

    def remove(self, claim_uid: str) -> bool:
        """Remove a claim's record durably; True when there was one."""
        return remove_durable(self.path_for(claim_uid))

    def quarantine(self, claim_uid: str) -> Path | None:
        """Move a claim's (corrupt) record aside to `<uid>.json.corrupt[.N]`, never
        overwriting an earlier one; returns the new path, None when there was no record."""
        source = self.path_for(claim_uid)
        if not source.exists():
            return None
        target = source.with_name(source.name + CORRUPT_SUFFIX)
        n = 0
        while target.exists():
            n += 1
            target = source.with_name(f"{source.name}{CORRUPT_SUFFIX}.{n}")
        rename_durable(source, target)
        return target

    def remove_temp_files(self) -> list[Path]:
        """Remove temp files left by writes a crash interrupted; returns what was removed."""
        stale = [
            p
            for p in self.directory.iterdir()
            if p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX)
        ]
        for path in stale:
            remove_durable(path)
        return stale

    def signature(self) -> tuple[tuple[str, int, int, int], ...]:
        """(name, inode, mtime, size) of every record file: changes whenever any record is
        written, replaced or removed (atomic replaces give a new inode), at the cost of a
        listing and a stat per record, without reading them."""
        entries = []
        for path in self.directory.iterdir():
            if path.name.startswith(".") or not path.name.endswith(RECORD_SUFFIX):
                continue
            try:
                info = path.stat()
            except FileNotFoundError:
                continue
            entries.append((path.name, info.st_ino, info.st_mtime_ns, info.st_size))
        return tuple(sorted(entries))

    def load_all(self) -> tuple[dict[str, PreparedClaim], list[CorruptRecord]]:
        """Every valid record by claim UID, and every record file that is not valid."""
        return read_records(self.directory)


def records_directory(data_dir: str | os.PathLike[str]) -> Path:
    """Where the records of a data directory are (without creating anything)."""
    return Path(data_dir) / "claims"


def read_records(directory: Path) -> tuple[dict[str, PreparedClaim], list[CorruptRecord]]:
    """Every valid record in `directory` by claim UID, and every record file that is not.

    Read-only and lock-free: records are replaced by atomic renames, so each file read is
    a whole record; a record removed while listing is skipped. Other processes (e.g.
    `simdra usage`) may call this next to a running plugin.
    """
    records: dict[str, PreparedClaim] = {}
    problems: list[CorruptRecord] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.startswith(".") or not name.endswith(RECORD_SUFFIX):
            continue  # temp files of interrupted writes, quarantined records
        uid = name[: -len(RECORD_SUFFIX)]
        try:
            records[uid] = _read(path, uid)
        except FileNotFoundError:
            continue  # unprepared between listing and reading
        except (OSError, ValueError) as exc:
            problems.append(CorruptRecord(uid, path, str(exc)))
    return records, problems


def encode_record(claim: PreparedClaim) -> bytes:
    """The bytes of a claim's record file."""
    payload = to_payload(claim)
    record = {
        "kind": RECORD_KIND,
        "version": FORMAT_VERSION,
        "checksum": _checksum(payload),
        "payload": payload,
    }
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def decode_record(data: bytes, uid: str) -> PreparedClaim:
    """Read a record file's bytes; ValueError says why they cannot be trusted."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    if record.get("version") != FORMAT_VERSION or record.get("kind") != RECORD_KIND:
        raise ValueError(
            f"format {record.get('kind')!r} version {record.get('version')!r}; "
            f"this driver reads {RECORD_KIND!r} version {FORMAT_VERSION}"
        )
    payload = record.get("payload")
    if record.get("checksum") != _checksum(payload):
        raise ValueError("checksum mismatch: the record was truncated or changed")
    try:
        claim = from_payload(payload)
    except RecordError as exc:
        raise ValueError(str(exc)) from None
    if claim.claim.uid != uid:
        raise ValueError(f"holds claim uid {claim.claim.uid!r} but is named for uid {uid!r}")
    return claim


def _read(path: Path, uid: str) -> PreparedClaim:
    check_safe_name(uid)
    return decode_record(path.read_bytes(), uid)


def _checksum(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
