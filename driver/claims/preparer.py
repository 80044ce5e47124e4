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
together as one batch (`driver.claims.batching`), and each step runs for every claim of
the batch before the next: for prepare, the contents of all records and CDI specs under
temp names, written and fsynced at once, then all records in place, one fsync of their
directory, then all CDI specs, one fsync of theirs; for unprepare, specs then records
likewise. Every claim keeps the order above, so the crash promise holds claim by claim,
and the fsyncs are shared. Claims are planned one after the other, each against a ledger
that already holds the claims planned before it.

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
`driver.claims.reconciler`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Protocol

from driver.claims.batching import GroupCommit
from driver.claims.checkpoint import CorruptRecord
from driver.claims.commit_phases import CommitPhases, FaultHook
from driver.claims.errors import ClaimError
from driver.claims.ledger import CapacityLedger
from driver.claims.names import check_ref
from driver.claims.plan import PreparedClaim
from driver.claims.prepare_items import PREPARER_LOG as log
from driver.claims.prepare_items import (
    Planned,
    Progress,
    Removal,
    in_context,
    in_item_context,
    label,
)
from driver.claims.prepare_planner import DeviceHook, Fetched, InventoryProvider, PreparePlanner
from driver.claims.prepared_store import PreparedStore
from driver.claims.reconcile_plan import Reclaim, RecordedClaim
from driver.claims.reserved import Reservation
from driver.claims.rules import DEFAULT_RULES, ClaimRules
from driver.claims.source import ClaimSource
from driver.claims.types import ClaimRef, PrepareResult, UnprepareResult
from driver.core.textlimits import clip_error

Serializer = Callable[[], AbstractContextManager[object]]


class StatusWriter(Protocol):
    """Publishes prepared claims in their `status.devices` (see `driver.claims.status`).

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
        rules: ClaimRules = DEFAULT_RULES,
    ) -> None:
        self._store = PreparedStore(driver_name, inventory, cdi_root, data_dir)
        self._planner = PreparePlanner(driver_name, source, inventory, rules, device_hook)
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

        Claims are read from the API server before taking the lock, as the Go helper
        does: a slow API server then delays this call only, not the unprepares and
        prepares of other pods waiting for the lock. Calls that wait for the lock
        together are then written together (see `_prepare_batch`)."""
        records = self._store.records
        fetched = self._planner.fetch([ref for ref in claims if ref.uid not in records])
        return self._prepares.submit((claims, fetched))

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare each claim from persisted state alone; unknown UIDs succeed. Calls
        that wait for the lock together are written together, as prepares are."""
        return self._unprepares.submit(claims)

    def recorded(self) -> dict[str, RecordedClaim]:
        """The prepared claims with when each was last prepared, for reconciliation."""
        return self._store.recorded_claims()

    def reclaim(self, claims: Sequence[Reclaim]) -> dict[str, UnprepareResult]:
        """Unprepare claims the kubelet will never unprepare (`driver.claims.reconciler`)
        the way NodeUnprepareResources does, but only those still recorded and not
        prepared (record written, or a prepare answered from it) since their `since`:
        checked inside the serialized section, so no prepare can slip in between."""
        with self._serialize():
            self._store.refresh()
            try:
                refs = [c.ref for c in claims if self._unused_since(c.ref.uid, c.since)]
                answers = self._unprepare_all(refs) if refs else {}
            finally:
                self._store.remember_stamp()
        return answers

    def _unused_since(self, claim_uid: str, since: float) -> bool:
        if claim_uid not in self._store.records:
            return False  # unprepared meanwhile, or unreadable now
        touched = self._store.touched_at(claim_uid)
        return touched is not None and touched < since

    # --- the serialized sections ----------------------------------------------------

    def _prepare_batch(
        self, requests: Sequence[tuple[list[ClaimRef], dict[str, Fetched]]]
    ) -> list[dict[str, PrepareResult]]:
        """One serialized section for the claims of several concurrent calls."""
        with self._serialize():
            self._store.refresh()
            try:
                answers = self._prepare_all(
                    [(ref, fetched.get(ref.uid)) for claims, fetched in requests for ref in claims]
                )
            finally:
                self._store.remember_stamp()
        return [{ref.uid: answers[ref.uid] for ref in claims} for claims, _ in requests]

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

    def _prepare_all(
        self, claims: list[tuple[ClaimRef, Fetched | None]]
    ) -> dict[str, PrepareResult]:
        """Plan and check every claim in order (each against the ledger holding the ones
        before it), then write them in phases (`CommitPhases.write`). A CDI spec is still
        never in place before its record is durable."""
        answers: dict[str, PrepareResult] = {}
        planned: dict[str, Planned] = {}
        for ref, fetched in claims:
            if ref.uid in answers or ref.uid in planned:
                continue  # the same claim twice in one batch: one answer
            outcome = in_context(ref, partial(self._start_prepare, fetched=fetched))
            if isinstance(outcome, Planned):
                planned[ref.uid] = outcome
            else:
                answers[ref.uid] = outcome
        if planned:
            answers.update(self._write_prepared(list(planned.values())))
        return answers

    def _start_prepare(self, ref: ClaimRef, fetched: Fetched | None) -> PrepareResult | Planned:
        """A claim's answer when it needs no writes (an error, or already prepared), else
        its plan, held in the ledger so that the claims after it are checked against it."""
        store = self._store
        progress = Progress("check claim uid")
        try:
            store.record_path(ref)
            spec_path = store.spec_path(ref)
            check_ref(ref)
            if ref.uid in store.corrupt:
                raise ClaimError(
                    f"{label(ref)}: {store.corrupt[ref.uid]}; not preparing it again "
                    "(an unprepare of the claim moves the record aside)"
                )
            recorded = store.records.get(ref.uid)
            if recorded is not None:
                # Already prepared (kubelet restart, retry): same answer, no redo, no fetch.
                store.answered[ref.uid] = time.time()  # in use: not to be reconciled
                progress.step = "restore CDI spec"
                store.ensure_spec(recorded)
                self._report_status(ref, recorded)
                return recorded.result
            prepared = self._planner.plan(ref, fetched, progress, store.ledger)
        except Exception as exc:
            return self._failed(ref, progress, exc)
        store.ledger.add(prepared)
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
