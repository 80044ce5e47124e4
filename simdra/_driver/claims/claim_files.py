"""The two new files of each claim a prepare batch writes, with their fsyncs shared.

A claim's record and its CDI spec are first encoded, then every one of the batch's files
is written under a temp name (invisible: CDI runtimes and the record loader skip
dot-files) and fsynced, all at once (the file system commits concurrent fsyncs together,
and the two directories' creates run side by side), then the records are renamed into
place and their directory fsynced by the caller, and only then is each CDI spec renamed
into place. So a spec is still never in place before its record is durable, and the
batch waits for three fsyncs (contents, records directory, specs directory) where
writing the files one after the other waited for two per file.

A spec whose temp write or fsync failed does not hold up its record: the failure is
kept and raised when the spec is to be put in place (step "write CDI spec"), as a failed
spec write was before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simdra._driver.atomicfile import StagedWrite, write_staged
from simdra._driver.claims.cdi import CDI_SPEC_MODE
from simdra._driver.claims.checkpoint import Checkpoint
from simdra._driver.claims.plan import PreparedClaim


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
