"""A batch: the calls that share one serialized section, the claims in it and the step
each is at, and its files written and removed phase by phase (group commit).

The section: one prepare/unprepare at a time, as the Go helper serializes them by
default (api-facts 1.4). Within one process a lock is enough; during a rolling update
two plugin instances serve the same node, so a lock file in the shared data directory
serializes across them too (`CallSerializer`, the only serializer).

The calls: the first caller to find no batch in progress becomes the leader: it takes
every request queued so far, runs them as one batch (one pass of fsyncs for all of them)
and hands each caller its own answer; callers that arrive meanwhile queue for the next
batch, which the same leader runs before it leaves. A caller never waits for more than
the batch in progress plus its own (`GroupCommit`).

The files: each step runs for every claim of the batch before the next, and each
directory fsync is shared by the batch (`CommitPhases`):

prepare:   contents of records and CDI specs under temp names, written and fsynced at once
           (`simdra._driver.claims.store.checkpoint.ClaimFiles`) -> records in place ->
           fsync of their directory -> device metadata files (what the specs mount) ->
           CDI specs in place -> fsync of theirs
unprepare: CDI specs -> fsync of their directory -> device metadata -> records (or
           corrupt records set aside) -> fsync of theirs

Every claim keeps the order of `simdra._driver.claims.prepare.transaction`'s docstring,
so its crash promise holds claim by claim. A failure fails its claim (a failed fsync:
every claim whose file it was to make durable), and memory is then re-read from disk,
since a rename or unlink can have taken effect before the step that failed.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Concatenate, Generic, ParamSpec, TypeVar

from simdra._driver import atomicfile
from simdra._driver.atomicfile import remove_durable, safe_child
from simdra._driver.claims.plan.prepared import PreparedClaim
from simdra._driver.claims.source import Fetched
from simdra._driver.claims.store.checkpoint import ClaimFiles, write_and_place_records
from simdra._driver.claims.store.prepared_store import PREPARE_LOG as log
from simdra._driver.claims.store.prepared_store import (
    PreparedStore,
    remove_metadata,
    write_metadata,
)
from simdra._driver.claims.types import ClaimRef, claim_label
from simdra._driver.core.logcontext import log_context
from simdra._driver.core.textlimits import clip, clip_error, one_line

T = TypeVar("T")
P = ParamSpec("P")
Request = TypeVar("Request")
Answer = TypeVar("Answer")
FaultHook = Callable[[str], None]


# --- the section ---------------------------------------------------------------------


class CallSerializer:
    """Context manager: one prepare/unprepare at a time, optionally across processes.

    It is also the factory of its sections (the preparer's `serialize`): calling it
    returns itself, so every section enters this one."""

    def __init__(self, lock_file: str | None = None) -> None:
        """lock_file: path of a file to flock around each call (None: in-process only)."""
        self.lock_file = lock_file
        self._lock = threading.Lock()
        self._fd: int | None = None

    def __call__(self) -> CallSerializer:
        return self

    def __enter__(self) -> CallSerializer:
        self._lock.acquire()
        if self.lock_file is None:
            return self
        try:
            # Read-only: flock needs no write access, and closing a descriptor opened
            # for writing is an inotify event (IN_CLOSE_WRITE) in the data directory,
            # which the live-devices thread watches for the fault file.
            # O_NOFOLLOW: a link planted at the lock's name is refused, never created
            # or opened at its target (start-up refuses one too; this covers the rest).
            self._fd = os.open(self.lock_file,
                               os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._release_file()
            self._lock.release()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._release_file()
        finally:
            self._lock.release()

    def _release_file(self) -> None:
        if self._fd is not None:
            # Closing the descriptor drops the flock.
            os.close(self._fd)
            self._fd = None


# --- the calls -----------------------------------------------------------------------


@dataclass
class _Slot(Generic[Request, Answer]):
    request: Request
    wake: threading.Event = field(default_factory=threading.Event)  # answered or promoted
    answered: bool = False
    answer: Answer | None = None
    error: BaseException | None = None


class GroupCommit(Generic[Request, Answer]):
    """Runs `run_batch(requests) -> answers` (same order, same length) for batches of
    concurrent `submit` calls."""

    def __init__(self, run_batch: Callable[[Sequence[Request]], Sequence[Answer]]) -> None:
        self._run_batch = run_batch
        self._mutex = threading.Lock()
        self._queue: list[_Slot[Request, Answer]] = []
        self._leading = False

    @property
    def waiting(self) -> int:
        """Requests queued for the next batch."""
        with self._mutex:
            return len(self._queue)

    def submit(self, request: Request) -> Answer:
        """The answer to `request`, computed in a batch with the concurrent ones."""
        slot: _Slot[Request, Answer] = _Slot(request)
        with self._mutex:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.wake.wait()
        if not slot.answered:  # the leader of the next batch, which holds this request
            self._lead()
        if slot.error is not None:
            raise slot.error
        return slot.answer  # type: ignore[return-value]

    def _lead(self) -> None:
        """Run one batch (every queued request), then hand the lead to the first request
        queued meanwhile, so that no caller runs other callers' batches after its own."""
        with self._mutex:
            batch, self._queue = self._queue, []
        try:
            answers = self._run_batch([slot.request for slot in batch])
        except BaseException as exc:  # every caller of the batch sees the failure
            for slot in batch:
                slot.error = exc
        else:
            for slot, answer in zip(batch, answers, strict=True):
                slot.answer = answer
        finally:
            for slot in batch:
                slot.answered = True
                slot.wake.set()
            with self._mutex:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._leading = False


# --- the claims ----------------------------------------------------------------------


class Progress:
    """The step a prepare/unprepare is at, so that an error can name it."""

    def __init__(self, step: str) -> None:
        self.step = step

    def failure(self, ref: ClaimRef, exc: Exception) -> str:
        """The per-claim error text for an unexpected exception at the current step."""
        return clip_error(f"{label(ref)}: step {self.step}: {type(exc).__name__}: {clip(exc)}")


@dataclass(frozen=True)
class PrepareRound:
    """What one prepare call brings to a serialized section: its claims still to answer,
    and what it saw of each before taking the lock, in this order: the record memory
    held (`looked`, None: none), then the claim as read from the API server (`fetched`).

    A section answers a claim only while its record is still the one looked at (so the
    read is newer than whatever read the record was made from); one whose record changed
    meanwhile is left unanswered, read again and brought to a later round. `last`: the
    call's last round, in which such a claim gets an error instead."""

    claims: list[ClaimRef]
    looked: Mapping[str, PreparedClaim | None]
    fetched: Mapping[str, Fetched]
    last: bool


class Unanswered(Enum):
    """A claim a section leaves to a later round of its call (see `PrepareRound`)."""

    RECORD_CHANGED = "its checkpoint record changed after the call looked at it"


@dataclass
class BatchItem:
    """A claim of a batch, and the step it is at."""

    ref: ClaimRef
    progress: Progress


@dataclass
class Planned(BatchItem):
    """A claim to prepare that passed its checks and waits for its files."""

    prepared: PreparedClaim
    spec_path: Path
    files: ClaimFiles | None = None  # staged at "write checkpoint"


@dataclass
class Removal(BatchItem):
    """A claim to unprepare: its spec file, and its record if it has one."""

    recorded: PreparedClaim | None
    spec_path: Path
    spec_removed: bool = False  # whether a directory fsync is owed for it
    record_removed: bool = False


Item = TypeVar("Item", bound=BatchItem)
# Called for an item whose step raised; the batch goes on without it.
Failure = Callable[[Item, Exception], None]


def in_context(ref: ClaimRef, work: Callable[[ClaimRef], T]) -> T:
    """Run `work(ref)` with the claim's identity on every log line it emits."""
    with log_context(claim=f"{ref.namespace}/{ref.name}", claim_uid=ref.uid):
        return work(ref)


def in_item_context(
    item: Item, work: Callable[Concatenate[Item, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """Run `work(item, *args, **kwargs)` with its claim's identity on every log line it
    emits. (Not a lambda with `i=item` in the loops: mypy cannot type its defaults.)"""
    return in_context(item.ref, lambda _ref: work(item, *args, **kwargs))


def label(ref: ClaimRef) -> str:
    """The claim as error and log texts name it."""
    return claim_label(ref.namespace, ref.name, ref.uid)


# --- the files -----------------------------------------------------------------------


class CommitPhases:
    """Writes and removes the files of a batch for the preparer, over its store.

    `fault` is called with the step name before every side effect (tests simulate a
    crash there)."""

    def __init__(self, store: PreparedStore, fault: FaultHook) -> None:
        self._store = store
        self._fault = fault

    def write(self, planned: list[Planned], fail: Failure[Planned]) -> list[Planned]:
        """Both files' contents written and fsynced in one wave, records, one fsync, CDI
        specs, one fsync; the claims that got all of them. Temp files of what did not go
        ahead are removed, whatever happened.

        The ledger already holds every planned claim; one whose record was not written
        is taken out of it, one whose record was is in `records` from then on."""
        try:
            return self._write(planned, fail)
        finally:
            for item in planned:
                if item.files is not None:
                    item.files.discard()

    def _write(self, planned: list[Planned], fail: Failure[Planned]) -> list[Planned]:
        store = self._store
        staged = self._run(planned, "write checkpoint", self._stage_files, fail)
        written = self._place_records(staged, fail)
        written = self._sync(written, store.checkpoint.sync, fail)
        recorded = {item.ref.uid for item in written}
        for item in planned:
            if item.ref.uid not in recorded:
                store.ledger.remove(item.ref.uid)  # never recorded: it holds nothing
        for item in written:
            store.records[item.ref.uid] = item.prepared
        with_metadata = self._run(written, "write device metadata", self._write_metadata, fail)
        specs = self._run(with_metadata, "write CDI spec", self._write_spec, fail)
        specs = self._sync(specs, lambda: atomicfile.fsync_dir(store.cdi_root), fail)
        done = self._run(specs, "answer", lambda item: None, fail)
        if len(done) < len(planned):
            store.resync()
        return done

    def remove(self, removals: list[Removal], fail: Failure[Removal]) -> list[Removal]:
        """CDI specs (one fsync), then the records (one fsync); the claims whose files
        are all gone. A record may outlive its CDI file (restart re-creates the file),
        never the other way round. Memory is left to the caller, except for a corrupt
        record set aside."""
        store = self._store
        specs = self._run(removals, "remove CDI spec", self._remove_spec, fail)
        if any(i.spec_removed for i in specs):  # nothing to sync for unknown claims
            specs = self._sync(specs, lambda: atomicfile.fsync_dir(store.cdi_root), fail)
        specs = self._run(specs, "remove device metadata", self._remove_metadata, fail)
        removed = [i for i in specs if i.ref.uid not in store.corrupt]
        corrupt = [i for i in specs if i.ref.uid in store.corrupt]
        done = self._run(corrupt, "move corrupt checkpoint record aside", self._set_aside, fail)
        gone = self._run(removed, "remove checkpoint", self._remove_record, fail)
        done += (self._sync(gone, store.checkpoint.sync, fail)
                 if any(i.record_removed for i in gone) else gone)
        if len(done) < len(removals):
            store.resync()
        return done

    def _run(
        self, items: list[Item], step: str, act: Callable[[Item], None], fail: Failure[Item]
    ) -> list[Item]:
        """Run `act` for each item at `step`, after the fault hook, with the claim on
        every log line; returns the items it succeeded for."""

        def one(item: Item) -> bool:
            try:
                self._fault(step)
                act(item)
            except Exception as exc:
                fail(item, exc)
                return False
            return True

        done = []
        for item in items:
            item.progress.step = step
            if in_item_context(item, one):
                done.append(item)
        return done

    def _sync(
        self, items: list[Item], sync: Callable[[], None], fail: Failure[Item]
    ) -> list[Item]:
        """One fsync for the files `items` wrote; if it fails, they all failed."""
        if not items:
            return items
        try:
            sync()
        except Exception as exc:
            for item in items:
                in_item_context(item, fail, exc)
            return []
        return items

    # --- one claim's step ------------------------------------------------------------

    def _stage_files(self, item: Planned) -> None:
        item.files = ClaimFiles.stage(self._store.checkpoint, item.prepared, item.spec_path)

    def _place_records(self, items: list[Planned], fail: Failure[Planned]) -> list[Planned]:
        """All staged files written and fsynced in one wave, then the records in place."""
        errors = write_and_place_records(self._store.checkpoint,
                                         [i.files for i in items if i.files is not None])
        for item, error in zip(items, errors, strict=True):
            if error is not None:
                in_item_context(item, fail, error)
        return [item for item, error in zip(items, errors, strict=True) if error is None]

    def _write_spec(self, item: Planned) -> None:
        assert item.files is not None
        item.files.place_spec()

    def _write_metadata(self, item: Planned) -> None:
        write_metadata(item.prepared, self._store.driver, self._store.metadata_root)

    def _remove_metadata(self, item: Removal) -> None:
        links = remove_metadata(self._store.metadata_root, item.ref.uid)
        if links:
            log.warning("device metadata of %s held symlinks, removed themselves, not "
                        "followed: %s", label(item.ref), one_line(", ".join(links)))

    def _remove_spec(self, item: Removal) -> None:
        recorded = item.recorded
        if recorded is not None and recorded.cdi_file != item.spec_path.name:
            item.spec_removed |= remove_durable(
                safe_child(self._store.cdi_root, recorded.cdi_file), sync_dir=False)
        item.spec_removed |= remove_durable(item.spec_path, sync_dir=False)

    def _set_aside(self, item: Removal) -> None:
        checkpoint = self._store.checkpoint
        checkpoint.mark_changing()
        moved = checkpoint.quarantine(item.ref.uid)
        log.warning("unprepared %s; corrupt record kept as %s", label(item.ref), moved)
        del self._store.corrupt[item.ref.uid]

    def _remove_record(self, item: Removal) -> None:
        uid = item.ref.uid
        checkpoint = self._store.checkpoint
        if uid in self._store.records or os.path.lexists(checkpoint.path_for(uid)):
            checkpoint.mark_changing()
            item.record_removed = checkpoint.remove(uid, sync=False)
