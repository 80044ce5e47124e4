"""Durable per-claim records: `<data dir>/claims/<uid>.json`, one file per claim.

One file per claim means prepare and unprepare of different claims never rewrite each
other's state, and a corrupt file costs one claim, not the node. Each record is
self-describing (format version, claim identity, what was prepared, the CDI file and its
full content, the answer) and carries a sha256 checksum, so a torn or tampered record is
detected instead of trusted (`simdra._driver.claims.store.record`: the envelope, its versions,
reading older and newer ones). Corrupt records, and records of a format only a newer
driver reads, are reported and kept; only an unprepare of that claim moves one aside
(`<uid>.json.corrupt`).

A prepare batch writes each claim's two new files, its record and its CDI spec, with
their fsyncs shared (`ClaimFiles`): both are first encoded, then every one of the
batch's files is written under a temp name (invisible: CDI runtimes and the record
loader skip dot-files) and fsynced, all at once (the file system commits concurrent
fsyncs together, and the two directories' creates run side by side), then the records
are renamed into place and their directory fsynced by the caller, and only then is each
CDI spec renamed into place. So a spec is still never in place before its record is
durable, and the batch waits for three fsyncs (contents, records directory, specs
directory) where writing the files one after the other waited for two per file. A spec
whose temp write or fsync failed does not hold up its record: the failure is kept and
raised when the spec is to be put in place (step "write CDI spec"), as a failed spec
write was before.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from simdra._driver import atomicfile
from simdra._driver.atomicfile import (
    StagedWrite,
    check_safe_name,
    own_directory,
    remove_durable,
    remove_stale_temps,
    rename_durable,
    safe_child,
    write_atomic,
    write_staged,
)
from simdra._driver.claims.plan.cdi import CDI_SPEC_MODE, CdiError, cdi_kind, spec_file_name
from simdra._driver.claims.plan.prepared import PreparedClaim
from simdra._driver.claims.store.record import MAX_RECORD_BYTES, decode_record, encode_record
from simdra._driver.core.nofollow import open_directory, read_regular
from simdra._driver.core.textlimits import clip, one_line

RECORD_SUFFIX = ".json"
CORRUPT_SUFFIX = ".corrupt"
REASON_LIMIT = 512  # characters of a reason shown in logs and `simdra usage`
RECORDS_MODE = 0o700  # the claims/ directory: only the plugin reads its records
RECORD_MODE = 0o600

# Raises ValueError when a well-formed record must still not be acted on.
TrustCheck = Callable[[PreparedClaim], None]
# Next to claims/, not in it: the token writers of records change first.
GENERATION_FILE = "claims.generation"
GENERATION_BYTES = 64
Stamp = tuple[bytes, int, int, int]


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

    def __init__(self, data_dir: str | os.PathLike[str], trust: TrustCheck | None = None) -> None:
        self.directory = records_directory(data_dir)
        own_directory(self.directory, RECORDS_MODE)
        self._trust = trust
        self._generation = Path(data_dir) / GENERATION_FILE
        self._nonce = secrets.token_hex(8)
        self._changes = 0
        self._generation_writer: BinaryIO | None = None  # see _generation_file

    def path_for(self, claim_uid: str) -> Path:
        """The record path of a claim; ValueError when the UID is not a safe file name."""
        return safe_child(self.directory, f"{claim_uid}{RECORD_SUFFIX}")

    def save(self, claim: PreparedClaim, *, sync: bool = True) -> None:
        """Write (or replace) the record of `claim`, atomically and durably (with
        `sync=False`: durable after the next `sync`, for writes that share one)."""
        write_atomic(
            self.path_for(claim.claim.uid), encode_record(claim), RECORD_MODE, sync_dir=sync
        )

    def stage(self, claim: PreparedClaim) -> StagedWrite:
        """The record of `claim`, encoded, to be written under a temp name with the rest
        of a batch (`simdra._driver.atomicfile.write_staged`); in place once committed."""
        return StagedWrite(self.path_for(claim.claim.uid), encode_record(claim), RECORD_MODE)

    def sync(self) -> None:
        """Make the records written with `sync=False` durable (one directory fsync)."""
        atomicfile.fsync_dir(self.directory)

    def remove(self, claim_uid: str, *, sync: bool = True) -> bool:
        """Remove a claim's record durably (with `sync=False`: after the next `sync`);
        True when there was one."""
        return remove_durable(self.path_for(claim_uid), sync_dir=sync)

    def quarantine(self, claim_uid: str) -> Path | None:
        """Move a claim's (corrupt) record aside to `<uid>.json.corrupt[.N]`, never
        overwriting an earlier one; returns the new path, None when there was no record."""
        source = self.path_for(claim_uid)
        if not os.path.lexists(source):  # a link is moved aside itself, not followed
            return None
        target = source.with_name(source.name + CORRUPT_SUFFIX)
        n = 0
        while os.path.lexists(target):
            n += 1
            target = source.with_name(f"{source.name}{CORRUPT_SUFFIX}.{n}")
        rename_durable(source, target)
        return target

    def remove_temp_files(self) -> list[Path]:
        """Remove temp files left by writes a crash interrupted; returns what was removed.
        Call it holding the lock that serializes writes of records."""
        # Every writer of records holds the serialize lock, as the caller does: a temp
        # file here of any age belongs to a write that will never finish.
        return remove_stale_temps(self.directory, older_than=0)

    def stamp(self) -> Stamp:
        """What changes whenever another process changes the records, in O(1): the
        generation token (see `mark_changing`) and the directory's inode and
        timestamps (any file added, removed or renamed, by anyone, e.g. an operator)."""
        try:  # os.open, not open(): a file object costs three more system calls
            fd = os.open(self._generation, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            token = b""
        else:
            try:
                token = os.read(fd, GENERATION_BYTES)
            finally:
                os.close(fd)
        info = os.stat(self.directory)
        return (token, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)

    def mark_changing(self) -> None:
        """Give the records a new generation token, before changing them: a sibling
        process (a rolling update's other instance, under the same lock) then reloads,
        even if this process dies half-way through its change. Rewritten in place, no
        fsync: only live processes compare it; start-up always reads everything."""
        self._changes += 1
        token = f"{os.getpid()}:{self._nonce}:{self._changes}".encode().ljust(GENERATION_BYTES)
        os.pwrite(self._generation_file().fileno(), token[:GENERATION_BYTES], 0)

    def _generation_file(self) -> BinaryIO:
        """The generation file, kept open for writing: closing a descriptor opened for
        writing is an inotify event (IN_CLOSE_WRITE) in the data directory, which the
        live-devices thread watches for the fault file, and each prepare would wake it.
        Opened again when someone removed the file (its link count is then 0)."""
        file = self._generation_writer
        if file is None or os.fstat(file.fileno()).st_nlink == 0:
            if file is not None:
                file.close()
            # O_NOFOLLOW: never write the token through a link put in its place.
            fd = os.open(self._generation, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         RECORD_MODE)
            file = self._generation_writer = os.fdopen(fd, "wb", buffering=0)
        return file

    def load_all(self) -> tuple[dict[str, PreparedClaim], list[CorruptRecord]]:
        """Every valid record by claim UID, and every record file that is not valid."""
        return read_records(self.directory, self._trust)


def records_directory(data_dir: str | os.PathLike[str]) -> Path:
    """Where the records of a data directory are (without creating anything)."""
    return Path(data_dir) / "claims"


def trusted_for(driver_name: str, metadata_root: str | None = None) -> TrustCheck:
    """The check that a record only names files of its own claim in this driver's CDI
    directory and, with `metadata_root` (the store's own), that its device metadata is
    there and its spec mounts nothing else for it: a record with a valid checksum can
    still have been written by hand."""
    kind = cdi_kind(driver_name)

    def check(claim: PreparedClaim) -> None:
        try:
            expected = spec_file_name(driver_name, claim.claim.uid)
        except CdiError as exc:
            raise ValueError(str(exc)) from None
        if claim.cdi_file != expected:
            raise ValueError(
                f"cdiFile {clip(repr(claim.cdi_file))} is not the CDI spec file of this claim "
                f"({expected}); not trusted"
            )
        if claim.cdi_spec.get("kind") != kind:
            shown = clip(repr(claim.cdi_spec.get("kind")))
            raise ValueError(f"CDI spec kind {shown} is not {kind}")
        if metadata_root is not None:
            _check_metadata(claim, driver_name, metadata_root)

    return check


def _check_metadata(claim: PreparedClaim, driver_name: str, root: str) -> None:
    """The record's device metadata root is the store's, and the spec's metadata devices
    are exactly the ones the plugin makes for it (none when the feature was off)."""
    if claim.metadata_root is not None and claim.metadata_root != root:
        raise ValueError(f"device metadata root {clip(repr(claim.metadata_root))} is not "
                         f"this plugin's ({root}); not trusted")
    marker = f"{claim.claim.uid}_metadata_"
    devices = claim.cdi_spec.get("devices")
    found = {d.get("name"): d.get("containerEdits") for d in devices
             if isinstance(d, dict) and str(d.get("name", "")).startswith(marker)
             } if isinstance(devices, list) else {}
    if found != claim.metadata_devices(driver_name):
        raise ValueError("CDI spec's device metadata mounts are not the ones the plugin "
                         f"makes for this claim under {root}; not trusted")


def read_records(
    directory: Path, trust: TrustCheck | None = None
) -> tuple[dict[str, PreparedClaim], list[CorruptRecord]]:
    """Every valid record in `directory` by claim UID, and every record file that is not.

    Per record: any failure to read, parse, verify or `trust` a file (whatever the
    exception) makes it a CorruptRecord, never an exception of this call.
    Read-only and lock-free: records are replaced by atomic renames, so each file read is
    a whole record; a record removed while listing is skipped. Other processes (e.g.
    `simdra usage`) may call this next to a running plugin.
    """
    records: dict[str, PreparedClaim] = {}
    problems: list[CorruptRecord] = []
    fd = open_directory(directory)  # NotADirectoryError when it is a link
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    for name in sorted(names):
        path = directory / name
        if name.startswith(".") or not name.endswith(RECORD_SUFFIX):
            continue  # temp files of interrupted writes, quarantined records
        uid = name[: -len(RECORD_SUFFIX)]
        try:
            claim = _read(path, uid)
            if trust is not None:
                trust(claim)
            records[uid] = claim
        except FileNotFoundError:
            continue  # unprepared between listing and reading
        except Exception as exc:  # one bad record costs its claim, never the caller
            problems.append(CorruptRecord(uid, path, _reason(exc)))
    return records, problems


def _reason(exc: Exception) -> str:
    text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return one_line(text, REASON_LIMIT)


def _read(path: Path, uid: str) -> PreparedClaim:
    check_safe_name(uid)
    # Never more than the limit into memory; a link or a FIFO is refused, not followed.
    return decode_record(read_regular(path, MAX_RECORD_BYTES), uid)


# --- a claim's new files, written with the rest of a batch -------------------


@dataclass
class ClaimFiles:
    """A claim's record and CDI spec, encoded, to be written under temp names and then
    put in place."""

    record: StagedWrite
    spec: StagedWrite | None
    spec_error: Exception | None = None

    @classmethod
    def stage(cls, checkpoint: Checkpoint, prepared: PreparedClaim, spec_path: Path) -> ClaimFiles:
        """Encode both files (the record's failure raises; the spec's is kept for
        `place_spec`). Nothing is written yet: `write_and_place_records` does."""
        record = checkpoint.stage(prepared)
        try:
            return cls(record, StagedWrite(spec_path, prepared.spec_bytes(), CDI_SPEC_MODE))
        except Exception as exc:  # the spec's step reports it, after the record
            return cls(record, None, exc)
        except BaseException:
            record.discard()
            raise

    def place_spec(self) -> None:
        """Rename the (synced) spec into place; call once the record is durable."""
        if self.spec_error is not None:
            raise self.spec_error
        assert self.spec is not None
        self.spec.commit()

    def discard(self) -> None:
        """Remove the temp files of whatever was not put in place."""
        self.record.discard()
        if self.spec is not None:
            self.spec.discard()


def write_and_place_records(
    checkpoint: Checkpoint, files: Sequence[ClaimFiles]
) -> list[Exception | None]:
    """Write and fsync every staged file at once, then rename each claim's record into
    place (the caller fsyncs the records directory next). Per claim: the exception that
    kept its record out, or None. A spec's failure is kept for `place_spec`."""
    specs = [f.spec for f in files if f.spec is not None]
    outcome = write_staged([f.record for f in files] + specs)
    record_errors, spec_errors = outcome[: len(files)], iter(outcome[len(files):])
    for claim in files:
        if claim.spec is not None:
            claim.spec_error = next(spec_errors)
    if any(error is None for error in record_errors):
        try:
            # Before any record changes: a sibling instance then reloads, even if this
            # process dies half-way through the renames.
            checkpoint.mark_changing()
        except Exception as exc:  # no record may change unannounced
            return [exc] * len(files)
    return [_place(claim.record) if error is None else error
            for claim, error in zip(files, record_errors, strict=True)]


def _place(record: StagedWrite) -> Exception | None:
    try:
        record.commit()
    except Exception as exc:  # that claim's error; the others go on
        return exc
    return None
