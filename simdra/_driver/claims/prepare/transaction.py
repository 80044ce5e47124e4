"""Prepare and unprepare claims: the side-effect half of the claims package.

Order of effects, chosen so a crash between any two steps converges on restart:

prepare:   checkpoint record -> CDI spec file -> answer
unprepare: CDI spec file -> checkpoint record

A CDI file is only ever written for a claim that already has a record, and a record is
only removed after its CDI file, so no CDI file can exist that no record (or corrupt
record) explains. On start the preparer removes CDI files without a record (crash
leftovers), rewrites missing CDI files of recorded claims, and drops temp files of
interrupted writes. The in-memory records and ledger mirror the checkpoint: they are
updated right after the record is written or removed.

Group commit: calls that queue for the serialized section while one runs are taken in
together as one batch (`simdra._driver.claims.batching`), and each step runs for every claim of
the batch before the next: for prepare, the contents of all records and CDI specs under
temp names, written and fsynced at once, then all records in place, one fsync of their
directory, then all CDI specs, one fsync of theirs; for unprepare, specs then records
likewise. Every claim keeps the order above, so the crash promise holds claim by claim,
and the fsyncs are shared. Claims are planned one after the other, each against a ledger
that already holds the claims planned before it.

Reads from the API server happen outside the serialized section, never in it: a call
first looks at the records memory holds for its claims, then reads every claim (in
parallel, recorded ones too), then takes the lock. In the section a claim is answered
only while its record is still the one the call looked at, so the read is at least as
new as the one the record was made from; a claim whose record changed in between (an
unprepare, a prepare by another call or instance) is left unanswered, read again after
the section and brought to the next one, at most PREPARE_ROUNDS sections per call in all,
the last of which answers it with an error naming the claim.

A record answers only for the allocation it was made for, and while its devices are on
the node (after a reboot the kubelet prepares before it starts the pods): when the claim
as read names other (pool, device, shareID)s than its record (the UID allocated anew),
it is planned for its allocation now, checked against the ledger without its old plan,
and its record and CDI spec are rewritten in place (record first); the old devices stay
held for the other claims of the batch until it is written. A failed read (API server
down, too slow, 404) says nothing about the allocation: the record answers as before;
another object under the same name (other UID) is an error (`prepare_checks`).

Two instances may share the directories during a rolling update (api-facts 6.1), serialized
by a file lock. Memory is the source of truth while the process lives: records are
written through and read back only at start-up and when another process may have
changed them. Each call starts, inside the serialized section, by comparing the
checkpoint's stamp (a generation token every writer changes before touching a record,
and the records directory's timestamps) with the one taken at the end of this
instance's last call: a read of a small file and a stat, whatever the number of claims.

The preparer's parts: this module is its public face and the serialized sections;
`prepare_planner` does everything before the first side effect, `commit_phases` the side
effects in the order above, `prepared_store` the files and their mirror in memory
(loading and start-up recovery), `prepare_items` the claims of a batch and their steps.
`reclaim` is the unprepare of claims the kubelet will never unprepare, for
`simdra._driver.claims.reconciler`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Protocol

from simdra._driver.claims.batching import GroupCommit
from simdra._driver.claims.checkpoint import CorruptRecord
from simdra._driver.claims.commit_phases import CommitPhases, FaultHook
from simdra._driver.claims.errors import ClaimError
from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.names import check_ref
from simdra._driver.claims.plan import PreparedClaim
from simdra._driver.claims.prepare_checks import (
    PREPARE_ROUNDS,
    held_key,
    held_until_written,
    record_unchanged,
    refuse_corrupt,
)
from simdra._driver.claims.prepare_items import PREPARER_LOG as log
from simdra._driver.claims.prepare_items import (
    Fetched,
    Planned,
    PrepareRound,
    Progress,
    Removal,
    Unanswered,
    in_context,
    in_item_context,
    label,
)
from simdra._driver.claims.prepare_planner import (
    FETCH_DEADLINE_S,
    DeviceHook,
    InventoryProvider,
    PreparePlanner,
)
from simdra._driver.claims.prepared_store import PreparedStore
from simdra._driver.claims.reconcile_plan import Reclaim, RecordedClaim
from simdra._driver.claims.reserved import Reservation
from simdra._driver.claims.rules import ClaimRules
from simdra._driver.claims.source import ClaimSource
from simdra._driver.claims.types import ClaimRef, PrepareResult, UnprepareResult
from simdra._driver.core.textlimits import clip_error

Serializer = Callable[[], AbstractContextManager[object]]


class StatusWriter(Protocol):
    """Publishes prepared claims in their `status.devices` (see `simdra._driver.claims.status`).

    Called inside the serialized section after the claim's files are in place; must not
    raise for API failures (the preparer logs and ignores anything that escapes).
    """

    def prepared(self, claim: PreparedClaim) -> None:
        """The claim is prepared (newly, or again with its recorded answer)."""
        ...

    def unprepared(self, ref: ClaimRef) -> None:
        """The claim is unprepared (or was never prepared here)."""
        ...


class Preparer:
    """Implements `ClaimPreparer` over a CDI directory and a data directory.

    `serialize` returns the context manager that makes prepare/unprepare calls mutually
    exclusive (default: a process-local lock; a file lock for rolling updates can be
    passed in). `fault` is called with the step name before every side effect; tests
    use it to simulate a crash at that point. `status_writer` (None: feature off) is told
    about every successful prepare and unprepare, so the claims' `status.devices` follow.
    `device_metadata`: a metadata file per request (`simdra._driver.claims.device_metadata`).
    """

    def __init__(
        self,
        driver_name: str,
        source: ClaimSource,
        inventory: InventoryProvider,
        cdi_root: str | os.PathLike[str],
        data_dir: str | os.PathLike[str],
        *,
        serialize: Serializer | None = None,
        fault: FaultHook | None = None,
        status_writer: StatusWriter | None = None,
        device_hook: DeviceHook | None = None,
        rules: ClaimRules | None = None,
        device_metadata: bool = False,
    ) -> None:
        self._store = PreparedStore(driver_name, inventory, cdi_root, data_dir)
        metadata_root = str(self._store.metadata_root) if device_metadata else None
        self._planner = PreparePlanner(driver_name, source, inventory,
                                       rules or ClaimRules(), device_hook, metadata_root)
        self._phases = CommitPhases(self._store, fault or (lambda step: None))
        lock = threading.Lock()
        self._serialize: Serializer = serialize or (lambda: lock)
        self._status_writer = status_writer
        self._prepares = GroupCommit(self._prepare_batch)
        self._unprepares = GroupCommit(self._unprepare_batch)
        with self._serialize():
            self._store.recover()

    @property
    def ledger(self) -> CapacityLedger:
        """The capacity ledger as of the last call (read it, do not change it)."""
        return self._store.ledger

    def prepared(self) -> dict[str, PreparedClaim]:
        """The prepared claims by UID, as recorded in the checkpoint at the last call."""
        return dict(self._store.records)

    def corrupt_records(self) -> list[CorruptRecord]:
        """Checkpoint records that could not be read; their claims cannot be prepared."""
        return list(self._store.corrupt.values())

    def reservations(self) -> list[Reservation]:
        """What each unreadable record keeps reserved in the ledger (see `reserved`)."""
        return list(self._store.reservations.values())

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare each claim on its own; every requested UID gets exactly one answer.

        Claims, recorded ones too, are read from the API server before taking the lock,
        as the Go helper does: a slow API server then delays this call only, not the
        unprepares and prepares of other pods waiting for the lock. A claim whose record
        changed before the section is read again and taken to a later section (see the
        module docstring); all rounds' reads share one FETCH_DEADLINE_S. Calls that wait
        for the lock together are written together (see `_prepare_batch`)."""
        started = time.monotonic()
        answers: dict[str, PrepareResult] = {}
        pending = claims
        for round_number in range(1, PREPARE_ROUNDS + 1):
            records = self._store.records  # read before the claims: see PrepareRound
            looked = {ref.uid: records.get(ref.uid) for ref in pending}
            time_left = FETCH_DEADLINE_S - (time.monotonic() - started)
            fetched = self._planner.fetch(
                pending, FETCH_DEADLINE_S if round_number == 1 else time_left)
            last = round_number == PREPARE_ROUNDS
            answers |= self._prepares.submit(PrepareRound(pending, looked, fetched, last))
            pending = [ref for ref in pending if ref.uid not in answers]
            if not pending:
                break
        return {ref.uid: answers[ref.uid] for ref in claims}

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare each claim from persisted state alone; unknown UIDs succeed. Calls
        that wait for the lock together are written together, as prepares are."""
        return self._unprepares.submit(claims)

    def recorded(self) -> dict[str, RecordedClaim]:
        """The prepared claims with when each was last prepared, for reconciliation."""
        return self._store.recorded_claims()

    def reclaim(self, claims: Sequence[Reclaim]) -> dict[str, UnprepareResult]:
        """Unprepare claims the kubelet will never unprepare (`simdra._driver.claims.reconciler`)
        the way NodeUnprepareResources does, but only those still recorded and not
        prepared (record written, or a prepare answered from it) since their touch stamp:
        checked inside the serialized section, so no prepare can slip in between."""
        with self._serialize():
            self._store.refresh()
            try:
                refs = [c.ref for c in claims if self._untouched(c.ref.uid, c.touched_at)]
                answers = self._unprepare_all(refs) if refs else {}
            finally:
                self._store.remember_stamp()
        return answers

    def _untouched(self, claim_uid: str, touched_at: float) -> bool:
        # Equality, not order: a step of the wall clock must not make a fresh prepare
        # look older than the check that found the claim leaked.
        if claim_uid not in self._store.records:
            return False  # unprepared meanwhile, or unreadable now
        touched = self._store.touched_at(claim_uid)
        return touched is not None and touched == touched_at

    # --- the serialized sections ----------------------------------------------------

    def _prepare_batch(self, rounds: Sequence[PrepareRound]) -> list[dict[str, PrepareResult]]:
        """One serialized section for the claims of several concurrent calls: each call's
        answers, without the claims it is to read again (never in its last round)."""
        with self._serialize():
            self._store.refresh()
            try:
                answers = self._prepare_all(rounds)
            finally:
                self._store.remember_stamp()
        return [{ref.uid: answers[ref.uid] for ref in r.claims if ref.uid in answers}
                for r in rounds]

    def _unprepare_batch(
        self, requests: Sequence[list[ClaimRef]]
    ) -> list[dict[str, UnprepareResult]]:
        """One serialized section for the claims of several concurrent calls."""
        with self._serialize():
            self._store.refresh()
            try:
                answers = self._unprepare_all([ref for claims in requests for ref in claims])
            finally:
                self._store.remember_stamp()
        return [{ref.uid: answers[ref.uid] for ref in claims} for claims in requests]

    # --- prepare ------------------------------------------------------------------

    def _prepare_all(self, rounds: Sequence[PrepareRound]) -> dict[str, PrepareResult]:
        """Plan and check every claim in order (each against the ledger holding the ones
        before it), then write them in phases (`CommitPhases.write`). A CDI spec is still
        never in place before its record is durable. A claim left unanswered gets no
        entry (its call reads it again)."""
        answers: dict[str, PrepareResult] = {}
        planned: dict[str, Planned] = {}
        for batch_round in rounds:
            for ref in batch_round.claims:
                if ref.uid in answers or ref.uid in planned:
                    continue  # the same claim twice in one batch: one answer
                outcome = in_context(ref, partial(
                    self._start_prepare, looked=batch_round.looked[ref.uid],
                    fetched=batch_round.fetched[ref.uid], last=batch_round.last))
                if isinstance(outcome, Planned):
                    planned[ref.uid] = outcome
                elif isinstance(outcome, PrepareResult):
                    answers[ref.uid] = outcome
        try:
            if planned:
                answers.update(self._write_prepared(list(planned.values())))
        finally:
            for uid in planned:
                self._store.ledger.remove(held_key(uid))
        return answers

    def _start_prepare(
        self, ref: ClaimRef, looked: PreparedClaim | None, fetched: Fetched, *, last: bool
    ) -> PrepareResult | Planned | Unanswered:
        """A claim's answer when it needs no writes (an error, or already prepared for its
        allocation), else its plan, held in the ledger so that the claims after it are
        checked against it; Unanswered when its record is not the one its call looked at
        (the call reads it again)."""
        store = self._store
        progress = Progress("check claim uid")
        try:
            store.record_path(ref)
            spec_path = store.spec_path(ref)
            check_ref(ref)
            refuse_corrupt(ref, store.corrupt)
            recorded = store.records.get(ref.uid)
            progress.step = "check record"
            if not record_unchanged(ref, recorded, looked, last=last):
                return Unanswered.RECORD_CHANGED
            if recorded is not None and self._planner.record_answers(ref, fetched, recorded):
                # Prepared for this allocation (kubelet restart, retry): same answer, no redo.
                store.answered[ref.uid] = time.time()  # in use: not to be reconciled
                self._planner.check_ready(recorded, progress)
                progress.step = "restore CDI spec"
                store.ensure_spec(recorded)
                self._report_status(ref, recorded)
                return recorded.result
            prepared = self._planner.plan(ref, fetched, progress, store.ledger)
        except Exception as exc:
            return self._failed(ref, progress, exc)
        store.ledger.add(prepared)  # replaces the plan of a recorded claim allocated anew
        if recorded is not None:
            store.ledger.add(held_until_written(recorded))
        return Planned(ref, progress, prepared, spec_path)

    def _failed(self, ref: ClaimRef, progress: Progress, exc: Exception) -> PrepareResult:
        if isinstance(exc, ClaimError):
            error = clip_error(f"{exc} [step: {progress.step}]")
            log.warning("prepare failed at step %r: %s", progress.step, error)
            return PrepareResult(error=error)
        log.exception("prepare of %s failed at step %r", label(ref), progress.step)
        return PrepareResult(error=progress.failure(ref, exc))

    def _write_prepared(self, planned: list[Planned]) -> dict[str, PrepareResult]:
        """The answers once the phases ran: the recorded result, or the step's error."""
        answers: dict[str, PrepareResult] = {}

        def fail(item: Planned, exc: Exception) -> None:
            answers[item.ref.uid] = self._failed(item.ref, item.progress, exc)

        for item in self._phases.write(planned, fail):
            in_item_context(item, self._prepared_done)
            answers[item.ref.uid] = item.prepared.result
        return answers

    def _prepared_done(self, item: Planned) -> None:
        log.info("prepared %s: %s", label(item.ref), [u.cdi_id for u in item.prepared.units])
        self._report_status(item.ref, item.prepared)

    def _report_status(self, ref: ClaimRef, prepared: PreparedClaim | None) -> None:
        """Tell the status writer; its failures never change the kubelet's answer."""
        if self._status_writer is None:
            return
        try:
            if prepared is None:
                self._status_writer.unprepared(ref)
            else:
                self._status_writer.prepared(prepared)
        except Exception:
            log.exception("status update of %s failed; the claim itself is fine", label(ref))

    # --- unprepare ----------------------------------------------------------------

    def _unprepare_all(self, refs: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Remove the claims' files in phases (`CommitPhases.remove`), then forget them."""
        answers: dict[str, UnprepareResult] = {}

        def fail(item: Removal, exc: Exception) -> None:
            log.exception("unprepare of %s failed at step %r", label(item.ref),
                          item.progress.step)
            answers[item.ref.uid] = UnprepareResult(error=item.progress.failure(item.ref, exc))

        for item in self._phases.remove(self._removals(refs, answers), fail):
            self._store.forget(item.ref.uid)
            in_context(item.ref, lambda r: self._report_status(r, None))
            answers[item.ref.uid] = UnprepareResult()
        return answers

    def _removals(
        self, refs: list[ClaimRef], answers: dict[str, UnprepareResult]
    ) -> list[Removal]:
        """One removal per claim, in order; a UID that is no file name is answered now."""
        items: dict[str, Removal] = {}
        for ref in refs:
            if ref.uid in answers or ref.uid in items:
                continue
            try:
                self._store.record_path(ref)
                spec_path = self._store.spec_path(ref)
            except ClaimError as exc:
                # Nothing can have been prepared under a UID that is not a safe file name,
                # so there is nothing to undo; an error would make the kubelet retry forever.
                log.warning("unprepare: nothing to do for %s", exc)
                answers[ref.uid] = UnprepareResult()
                continue
            items[ref.uid] = Removal(
                ref, Progress("remove CDI spec"), self._store.records.get(ref.uid), spec_path)
        return list(items.values())

