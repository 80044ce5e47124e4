"""One prepare and one unprepare, each read top to bottom here: the claim lane's
transaction, every step a call into the concept that does it.

prepare:   fetch   the call's claims from the API server, outside the lock (`source`)
           plan    each claim for its allocation (`plan`), or answer it from its record
           check   it against the capacity ledger holding the claims before it (`ledger`)
           write   the batch's records, then CDI specs, phase by phase (`batch`, `store`)
           answer  every claim: its devices, or an error naming the claim and the step
unprepare: remove  the batch's CDI specs, then records, phase by phase
           answer  every claim (an unknown one succeeds)

Order of effects, chosen so a crash between any two steps converges on restart:

prepare:   checkpoint record -> CDI spec file -> answer
unprepare: CDI spec file -> checkpoint record

A CDI file is only ever written for a claim that already has a record, and a record is
only removed after its CDI file, so no CDI file can exist that no record (or corrupt
record) explains. On start the preparer removes CDI files without a record (crash
leftovers), rewrites missing CDI files of recorded claims, and drops temp files of
interrupted writes. The in-memory records and ledger mirror the checkpoint: they are
updated right after the record is written or removed.

Calls that queue for the serialized section while one runs are one batch (group
commit, `simdra._driver.claims.prepare.batch`): its claims are planned one after the
other, each against a ledger that already holds the ones before it, then written step
by step for all of them, the fsyncs shared and the order above kept claim by claim.

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
another object under the same name (other UID) is an error (`parse_claim`).

Two instances may share the directories during a rolling update (api-facts 6.1), serialized
by a file lock. Memory is the source of truth while the process lives: records are
written through and read back only at start-up and when another process may have
changed them (`PreparedStore.refresh`, at the start of every section: a read of a small
file and a stat, whatever the number of claims). `reclaim` is the unprepare of claims
the kubelet will never unprepare, for `simdra._driver.claims.reconcile.reconciler`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.allocation import (
    allocated_now,
    check_ref,
    devices_text,
    parse_claim,
)
from simdra._driver.claims.plan.config import ClaimRules
from simdra._driver.claims.plan.prepared import InventoryProvider, PreparedClaim, plan_prepare
from simdra._driver.claims.prepare.batch import (
    CallSerializer,
    CommitPhases,
    FaultHook,
    GroupCommit,
    Planned,
    PrepareRound,
    Progress,
    Removal,
    Unanswered,
    in_context,
    in_item_context,
    label,
)
from simdra._driver.claims.reconcile.plan import Reclaim, RecordedClaim
from simdra._driver.claims.source import FETCH_DEADLINE_S, ClaimSource, Fetched, fetch_claims
from simdra._driver.claims.status.worker import StatusWriter
from simdra._driver.claims.store.checkpoint import CorruptRecord
from simdra._driver.claims.store.prepared_store import PREPARE_LOG as log
from simdra._driver.claims.store.prepared_store import PreparedStore
from simdra._driver.claims.store.reserved import Reservation
from simdra._driver.claims.types import ClaimError, ClaimRef, PrepareResult, UnprepareResult
from simdra._driver.core.textlimits import clip_error, one_line

Serializer = Callable[[], AbstractContextManager[object]]
# Called with (pool, device) for every device of a claim about to be prepared.
DeviceHook = Callable[[str, str], None]
# Serialized sections one prepare call may take: one, and one more each time a claim's
# record changed between the call's look and the section (a race, not a steady state).
PREPARE_ROUNDS = 3
_DEVICES_SHOWN = 8  # devices named in one error or log line


class Preparer:
    """Implements `ClaimPreparer` over a CDI directory and a data directory.

    `serialize` returns the context manager that makes prepare/unprepare calls mutually
    exclusive (default: a process-local `CallSerializer`; one with the file lock, for
    rolling updates, can be passed in). `fault` is called with the step name before
    every side effect; tests use it to simulate a crash at that point. `status_writer`
    (None: feature off) is told about every successful prepare and unprepare, so the
    claims' `status.devices` follow. `device_metadata`: a metadata file per request
    (`simdra._driver.claims.plan.metadata`).
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
        self._driver, self._source, self._inventory = driver_name, source, inventory
        self._rules = rules or ClaimRules()
        self._device_hook = device_hook
        self._store = PreparedStore(driver_name, inventory, cdi_root, data_dir)
        self._metadata_root = str(self._store.metadata_root) if device_metadata else None
        self._phases = CommitPhases(self._store, fault or (lambda step: None))
        self._serialize: Serializer = serialize or CallSerializer()
        self._status_writer = status_writer
        self._prepares = GroupCommit(self._prepare_section)
        self._unprepares = GroupCommit(self._unprepare_section)
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

    def recorded(self) -> dict[str, RecordedClaim]:
        """The prepared claims with when each was last prepared, for reconciliation."""
        return self._store.recorded_claims()

    # --- prepare: fetch, plan, check, write, answer ------------------------------------

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare each claim on its own; every requested UID gets exactly one answer.

        Claims, recorded ones too, are read from the API server before taking the lock,
        as the Go helper does: a slow API server then delays this call only, not the
        unprepares and prepares of other pods waiting for the lock. A claim whose record
        changed before the section is read again and taken to a later section (see the
        module docstring); all rounds' reads share one FETCH_DEADLINE_S. Calls that wait
        for the lock together are written together (see `_prepare_section`)."""
        started = time.monotonic()
        answers: dict[str, PrepareResult] = {}
        pending = claims
        for round_number in range(1, PREPARE_ROUNDS + 1):
            records = self._store.records  # read before the claims: see PrepareRound
            looked = {ref.uid: records.get(ref.uid) for ref in pending}
            time_left = FETCH_DEADLINE_S - (time.monotonic() - started)
            fetched = fetch_claims(self._source, pending,
                                   FETCH_DEADLINE_S if round_number == 1 else time_left)
            last = round_number == PREPARE_ROUNDS
            answers |= self._prepares.submit(PrepareRound(pending, looked, fetched, last))
            pending = [ref for ref in pending if ref.uid not in answers]
            if not pending:
                break
        return {ref.uid: answers[ref.uid] for ref in claims}

    def _prepare_section(
        self, rounds: Sequence[PrepareRound]
    ) -> list[dict[str, PrepareResult]]:
        """One serialized section for the claims of several concurrent calls: plan and
        check each claim, write the planned ones, then each call's answers, without the
        claims it is to read again (never in its last round). A CDI spec is still never
        in place before its record is durable."""
        with self._section():
            answers, planned = self._plan_and_check_all(rounds)
            answers |= self._write_all(planned)
        return [{ref.uid: answers[ref.uid] for ref in r.claims if ref.uid in answers}
                for r in rounds]

    def _plan_and_check_all(
        self, rounds: Sequence[PrepareRound]
    ) -> tuple[dict[str, PrepareResult], dict[str, Planned]]:
        """Each claim in order, each against the ledger holding the ones before it: the
        answers of those that need no writes, and the plans of the rest. A claim left
        unanswered is in neither (its call reads it again)."""
        answers: dict[str, PrepareResult] = {}
        planned: dict[str, Planned] = {}
        for batch_round in rounds:
            for ref in batch_round.claims:
                if ref.uid in answers or ref.uid in planned:
                    continue  # the same claim twice in one batch: one answer
                outcome = in_context(ref, partial(
                    self._plan_and_check, looked=batch_round.looked[ref.uid],
                    fetched=batch_round.fetched[ref.uid], last=batch_round.last))
                if isinstance(outcome, Planned):
                    planned[ref.uid] = outcome
                elif isinstance(outcome, PrepareResult):
                    answers[ref.uid] = outcome
        return answers, planned

    def _plan_and_check(
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
            store.refuse_corrupt(ref)
            recorded = store.records.get(ref.uid)
            progress.step = "check record"
            if not _record_unchanged(ref, recorded, looked, last=last):
                return Unanswered.RECORD_CHANGED
            if recorded is not None and self._record_answers(ref, fetched, recorded):
                return self._answer_from_record(ref, recorded, progress)
            prepared = self._plan(ref, fetched, progress)
            self._check(prepared, progress)
        except Exception as exc:
            return self._failed(ref, progress, exc)
        store.ledger.add(prepared)  # replaces the plan of a recorded claim allocated anew
        if recorded is not None:
            store.ledger.add(_held_until_written(recorded))
        return Planned(ref, progress, prepared, spec_path)

    def _plan(self, ref: ClaimRef, fetched: Fetched, progress: Progress) -> PreparedClaim:
        """The claim as read, its allocation parsed and planned against the inventory."""
        progress.step = "fetch claim"
        if isinstance(fetched, Exception):
            raise fetched
        progress.step = "read allocation"
        allocation = parse_claim(fetched, self._driver, ref)
        progress.step = "read inventory"
        inventory = self._inventory()
        progress.step = "plan"
        return plan_prepare(allocation, inventory, self._driver, self._rules,
                            self._metadata_root)

    def _check(self, prepared: PreparedClaim, progress: Progress) -> None:
        """ClaimError unless the plan fits next to the claims the ledger holds (an older
        plan of the same claim left out); then the device hook, each device once, the
        last thing before any side effect (fault injection fails or delays it there)."""
        progress.step = "check capacity"
        problems = self._store.ledger.check(prepared)
        if problems:
            raise ClaimError(f"{label(prepared.claim)}: " + "; ".join(problems))
        if self._device_hook is None:
            return
        progress.step = "device hook"
        for pool, device in dict.fromkeys((u.pool, u.device) for u in prepared.units):
            try:
                self._device_hook(pool, device)
            except Exception as exc:  # reported as the claim's error
                raise ClaimError(f"{label(prepared.claim)}: {exc}") from exc

    def _write_all(self, planned: dict[str, Planned]) -> dict[str, PrepareResult]:
        """The planned claims' files, in phases (`CommitPhases.write`): each one's answer,
        the recorded result or the step's error. The old plans held for claims allocated
        anew leave the ledger whatever happened."""
        answers: dict[str, PrepareResult] = {}

        def fail(item: Planned, exc: Exception) -> None:
            answers[item.ref.uid] = self._failed(item.ref, item.progress, exc)

        try:
            written = self._phases.write(list(planned.values()), fail) if planned else []
            for item in written:
                in_item_context(item, self._prepared_done)
                answers[item.ref.uid] = item.prepared.result
        finally:
            for uid in planned:
                self._store.ledger.remove(_held_key(uid))
        return answers

    def _prepared_done(self, item: Planned) -> None:
        log.info("prepared %s: %s", label(item.ref), [u.cdi_id for u in item.prepared.units])
        self._report_status(item.ref, item.prepared)

    def _failed(self, ref: ClaimRef, progress: Progress, exc: Exception) -> PrepareResult:
        if isinstance(exc, ClaimError):
            error = clip_error(f"{exc} [step: {progress.step}]")
            log.warning("prepare failed at step %r: %s", progress.step, error)
            return PrepareResult(error=error)
        log.exception("prepare of %s failed at step %r", label(ref), progress.step)
        return PrepareResult(error=progress.failure(ref, exc))

    # --- a claim its record answers ------------------------------------------------

    def _record_answers(self, ref: ClaimRef, fetched: Fetched, recorded: PreparedClaim) -> bool:
        """Whether the claim's record answers this prepare of it, given the claim as read.

        Yes when the read failed (what the API server holds now is unknown, and unknown
        is no reason to undo a prepared claim), or when the claim read is the recorded one
        (same namespace, name and UID) and this driver's allocation in it names the
        recorded (pool, device, shareID)s. Otherwise the claim is to be planned from the
        read, which refuses another claim under the name; a reallocation of the same
        claim is logged here, naming both device sets."""
        if isinstance(fetched, Exception):
            return True
        now = allocated_now(fetched, ref, self._driver)
        if now is None:
            return False
        recorded_keys = frozenset(unit.key for unit in recorded.units)
        if now == recorded_keys:
            return True
        log.warning(
            "%s is allocated other devices than its checkpoint record: recorded %s, "
            "allocated now %s; preparing it for the allocation it has now", label(ref),
            devices_text(recorded_keys, _DEVICES_SHOWN), devices_text(now, _DEVICES_SHOWN),
        )
        return False

    def _answer_from_record(
        self, ref: ClaimRef, recorded: PreparedClaim, progress: Progress
    ) -> PrepareResult:
        """Prepared for this allocation (kubelet restart, retry): the same answer, no
        redo, once its devices are on the node and its CDI spec is in place."""
        self._store.answered[ref.uid] = time.time()  # in use: not to be reconciled
        self._check_ready(recorded, progress)
        progress.step = "restore CDI spec"
        self._store.ensure_spec(recorded)
        self._report_status(ref, recorded)
        return recorded.result

    def _check_ready(self, recorded: PreparedClaim, progress: Progress) -> None:
        """ClaimError unless every device the record holds is on the node now.

        A prepare the record answers is the kubelet asking again after its own restart
        or, before it restarts the pods, after a reboot (helper v0.38's contract): the
        place to find that a device went away, rather than to answer with a CDI device
        that names nothing and let the container fail to start."""
        progress.step = "check devices ready"
        inventory = self._inventory()
        gone = sorted({f"{u.pool}/{u.device}" for u in recorded.units
                       if inventory.device(u.pool, u.device) is None})
        if gone:
            shown = ", ".join(one_line(name) for name in gone[:_DEVICES_SHOWN])
            more = f" and {len(gone) - _DEVICES_SHOWN} more" if len(gone) > _DEVICES_SHOWN else ""
            which = f"devices {shown}{more} are" if len(gone) > 1 else f"device {shown} is"
            raise ClaimError(f"{label(recorded.claim)}: prepared, but {which} no longer on "
                             "this node; not ready (an unprepare of the claim releases it)")

    # --- unprepare: remove, answer ---------------------------------------------------

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare each claim from persisted state alone; unknown UIDs succeed. Calls
        that wait for the lock together are written together, as prepares are."""
        return self._unprepares.submit(claims)

    def reclaim(self, claims: Sequence[Reclaim]) -> dict[str, UnprepareResult]:
        """Unprepare claims the kubelet will never unprepare (`simdra._driver.claims.
        reconcile.reconciler`) the way NodeUnprepareResources does, but only those still
        recorded and not prepared (record written, or a prepare answered from it) since
        their touch stamp: checked inside the serialized section, so no prepare can slip
        in between."""
        with self._section():
            refs = [c.ref for c in claims if self._untouched(c.ref.uid, c.touched_at)]
            return self._remove_all(refs) if refs else {}

    def _untouched(self, claim_uid: str, touched_at: float) -> bool:
        # Equality, not order: a step of the wall clock must not make a fresh prepare
        # look older than the check that found the claim leaked.
        if claim_uid not in self._store.records:
            return False  # unprepared meanwhile, or unreadable now
        touched = self._store.touched_at(claim_uid)
        return touched is not None and touched == touched_at

    def _unprepare_section(
        self, requests: Sequence[list[ClaimRef]]
    ) -> list[dict[str, UnprepareResult]]:
        """One serialized section for the claims of several concurrent calls."""
        with self._section():
            answers = self._remove_all([ref for claims in requests for ref in claims])
        return [{ref.uid: answers[ref.uid] for ref in claims} for claims in requests]

    def _remove_all(self, refs: list[ClaimRef]) -> dict[str, UnprepareResult]:
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

    # --- both ------------------------------------------------------------------------

    @contextmanager
    def _section(self) -> Iterator[None]:
        """The serialized section: memory reloaded first when another instance changed
        the records, the checkpoint's stamp taken at its end, whatever happened."""
        with self._serialize():
            self._store.refresh()
            try:
                yield
            finally:
                self._store.remember_stamp()

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


def _record_unchanged(
    ref: ClaimRef, recorded: PreparedClaim | None, looked: PreparedClaim | None, *, last: bool
) -> bool:
    """True when the record is the one the call looked at before reading the claim (the
    read is then at least as new as the record). False: answer in another round;
    ClaimError when this was the call's last round."""
    if recorded == looked:
        return True
    if not last:
        return False
    raise ClaimError(
        f"{label(ref)}: its checkpoint record changed between the claim's read and the "
        f"serialized section {PREPARE_ROUNDS} times in a row (other prepares or unprepares "
        "of the claim ran meanwhile); the kubelet retries"
    )


def _held_key(claim_uid: str) -> str:
    """Where the old plan of a claim planned anew is held (a "/" is never in a UID, so no
    claim's own entries are ever filed under it)."""
    return f"{claim_uid}/previous-allocation"


def _held_until_written(recorded: PreparedClaim) -> PreparedClaim:
    """The recorded plan of a claim being planned anew, filed under `_held_key`: should
    the claim's record write fail, the old record still names those devices, so no
    other claim of the batch may take them."""
    return dataclasses.replace(
        recorded, claim=dataclasses.replace(recorded.claim, uid=_held_key(recorded.claim.uid)))
