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
the batch before the next: for prepare, all records, one fsync of their directory, then
all CDI specs, one fsync of theirs; for unprepare, specs then records likewise. Every
claim keeps the order above, so the crash promise holds claim by claim, and the fsyncs
are shared. Claims are planned one after the other, each against a ledger that already
holds the claims planned before it.

Two instances may share the directories during a rolling update (api-facts 6.1), serialized
by a file lock. Memory is the source of truth while the process lives: records are
written through and read back only at start-up and when another process may have
changed them. Each call starts, inside the serialized section, by comparing the
checkpoint's stamp (a generation token every writer changes before touching a record,
and the records directory's timestamps) with the one taken at the end of this
instance's last call: a read of a small file and a stat, whatever the number of claims.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from driver import atomicfile
from driver.atomicfile import (
    TEMP_SUFFIX,
    make_directory,
    remove_durable,
    safe_child,
    write_atomic,
)
from driver.claims.allocation import parse_claim
from driver.claims.batching import GroupCommit
from driver.claims.cdi import (
    CDI_DIR_MODE,
    CDI_SPEC_MODE,
    claim_uid_of_file,
    spec_file_name,
    spec_file_prefix,
)
from driver.claims.checkpoint import Checkpoint, CorruptRecord, Stamp, trusted_for
from driver.claims.errors import ClaimError, claim_label
from driver.claims.ledger import CapacityLedger
from driver.claims.names import check_ref
from driver.claims.plan import PreparedClaim, device_counters, plan_prepare
from driver.claims.reserved import Reservation, reservation
from driver.claims.rules import DEFAULT_RULES, ClaimRules
from driver.claims.source import ClaimSource
from driver.claims.types import ClaimRef, PrepareResult, UnprepareResult
from driver.core.logcontext import log_context
from driver.core.textlimits import clip, clip_error
from driver.devices.model import Inventory

log = logging.getLogger(__name__)

InventoryProvider = Callable[[], Inventory]
Serializer = Callable[[], AbstractContextManager[object]]
T = TypeVar("T")
# A claim as read from the API server, or the exception reading it raised.
_Fetched = dict[str, Any] | Exception
FaultHook = Callable[[str], None]
# Called with (pool, device) for every device of a claim about to be prepared.
DeviceHook = Callable[[str, str], None]


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
        self._driver = driver_name
        self._rules = rules
        self._source = source
        self._inventory = inventory
        self._cdi_root = make_directory(cdi_root, CDI_DIR_MODE)
        self._spec_prefix = spec_file_prefix(driver_name)  # validates the driver name
        self._checkpoint = Checkpoint(data_dir, trust=trusted_for(driver_name))
        lock = threading.Lock()
        self._serialize: Serializer = serialize or (lambda: lock)
        self._fault: FaultHook = fault or (lambda step: None)
        self._status_writer = status_writer
        self._device_hook = device_hook
        self._records: dict[str, PreparedClaim] = {}
        self._corrupt: dict[str, CorruptRecord] = {}
        self._reservations: dict[str, Reservation] = {}
        self._ledger = CapacityLedger()
        self._stamp: Stamp | None = None
        self._prepares = GroupCommit(self._prepare_batch)
        self._unprepares = GroupCommit(self._unprepare_batch)
        with self._serialize():
            self._recover()
            self._stamp = self._checkpoint.stamp()

    @property
    def ledger(self) -> CapacityLedger:
        """The capacity ledger as of the last call (read it, do not change it)."""
        return self._ledger

    def prepared(self) -> dict[str, PreparedClaim]:
        """The prepared claims by UID, as recorded in the checkpoint at the last call."""
        return dict(self._records)

    def corrupt_records(self) -> list[CorruptRecord]:
        """Checkpoint records that could not be read; their claims cannot be prepared."""
        return list(self._corrupt.values())

    def reservations(self) -> list[Reservation]:
        """What each unreadable record keeps reserved in the ledger (see `reserved`)."""
        return list(self._reservations.values())

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        """Prepare each claim on its own; every requested UID gets exactly one answer.

        Claims are read from the API server before taking the lock, as the Go helper
        does: a slow API server then delays this call only, not the unprepares and
        prepares of other pods waiting for the lock. Calls that wait for the lock
        together are then written together (see `_prepare_batch`)."""
        fetched = self._fetch([ref for ref in claims if ref.uid not in self._records])
        return self._prepares.submit((claims, fetched))

    def _prepare_batch(
        self, requests: Sequence[tuple[list[ClaimRef], dict[str, _Fetched]]]
    ) -> list[dict[str, PrepareResult]]:
        """One serialized section for the claims of several concurrent calls."""
        with self._serialize():
            self._refresh()
            try:
                answers = self._prepare_all(
                    [(ref, fetched.get(ref.uid)) for claims, fetched in requests for ref in claims]
                )
            finally:
                self._stamp = self._checkpoint.stamp()
        return [{ref.uid: answers[ref.uid] for ref in claims} for claims, _ in requests]

    def _fetch(self, claims: list[ClaimRef]) -> dict[str, _Fetched]:
        """Each claim's JSON, or the exception reading it raised (reported later, as that
        claim's error)."""
        fetched: dict[str, _Fetched] = {}
        for ref in claims:
            try:
                fetched[ref.uid] = self._source.get(ref.namespace, ref.name)
            except Exception as exc:  # becomes this claim's error, at step "fetch claim"
                fetched[ref.uid] = exc
        return fetched

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """Unprepare each claim from persisted state alone; unknown UIDs succeed. Calls
        that wait for the lock together are written together, as prepares are."""
        return self._unprepares.submit(claims)

    def _unprepare_batch(
        self, requests: Sequence[list[ClaimRef]]
    ) -> list[dict[str, UnprepareResult]]:
        """One serialized section for the claims of several concurrent calls."""
        with self._serialize():
            self._refresh()
            try:
                answers = self._unprepare_all([ref for claims in requests for ref in claims])
            finally:
                self._stamp = self._checkpoint.stamp()
        return [{ref.uid: answers[ref.uid] for ref in claims} for claims in requests]

    def _refresh(self) -> None:
        """Reload the records if another instance changed them since our last call."""
        stamp = self._checkpoint.stamp()
        if stamp == self._stamp:
            return
        log.info("checkpoint changed by another instance; reloading the claim records")
        self._load_records()
        self._stamp = stamp

    # --- prepare ------------------------------------------------------------------

    def _prepare_all(
        self, claims: list[tuple[ClaimRef, _Fetched | None]]
    ) -> dict[str, PrepareResult]:
        """Plan and check every claim in order (each against the ledger holding the ones
        before it), then write them in phases, each phase's fsyncs shared: all records,
        one fsync of their directory, then all CDI specs, one fsync of theirs. A CDI spec
        is still never in place before its record is durable."""
        answers: dict[str, PrepareResult] = {}
        planned: dict[str, _Planned] = {}
        for ref, fetched in claims:
            if ref.uid in answers or ref.uid in planned:
                continue  # the same claim twice in one batch: one answer
            outcome = _in_context(ref, lambda r, f=fetched: self._start_prepare(r, f))
            if isinstance(outcome, _Planned):
                planned[ref.uid] = outcome
            else:
                answers[ref.uid] = outcome
        if planned:
            answers.update(self._write_prepared(list(planned.values())))
        return answers

    def _start_prepare(self, ref: ClaimRef, fetched: _Fetched | None) -> PrepareResult | _Planned:
        """A claim's answer when it needs no writes (an error, or already prepared), else
        its plan, held in the ledger so that the claims after it are checked against it."""
        progress = _Progress("check claim uid")
        try:
            self._record_path(ref)
            spec_path = self._spec_path(ref)
            check_ref(ref)
            if ref.uid in self._corrupt:
                raise ClaimError(
                    f"{_label(ref)}: {self._corrupt[ref.uid]}; not preparing it again "
                    "(an unprepare of the claim moves the record aside)"
                )
            recorded = self._records.get(ref.uid)
            if recorded is not None:
                # Already prepared (kubelet restart, retry): same answer, no redo, no fetch.
                progress.step = "restore CDI spec"
                self._ensure_spec(recorded)
                self._report_status(ref, recorded)
                return recorded.result
            prepared = self._plan(ref, fetched, progress)
        except Exception as exc:
            return self._failed(ref, progress, exc)
        self._ledger.add(prepared)
        return _Planned(ref, progress, prepared, spec_path)

    def _failed(self, ref: ClaimRef, progress: _Progress, exc: Exception) -> PrepareResult:
        if isinstance(exc, ClaimError):
            error = clip_error(f"{exc} [step: {progress.step}]")
            log.warning("prepare failed at step %r: %s", progress.step, error)
            return PrepareResult(error=error)
        log.exception("prepare of %s failed at step %r", _label(ref), progress.step)
        return PrepareResult(error=progress.failure(ref, exc))

    def _write_prepared(self, planned: list[_Planned]) -> dict[str, PrepareResult]:
        """Records, one directory fsync, CDI specs, one directory fsync, answers.

        A failure fails its claim (a failed directory fsync: every claim whose file it
        was to make durable); afterwards memory is re-read from disk, since a rename can
        have taken effect before the step that failed."""
        answers: dict[str, PrepareResult] = {}

        def fail(item: _Planned, exc: Exception) -> None:
            answers[item.ref.uid] = self._failed(item.ref, item.progress, exc)

        written = self._phase(planned, "write checkpoint", self._save_record, fail)
        written = self._sync(written, self._checkpoint.sync, fail)
        for item in planned:
            if item.ref.uid in answers:
                self._ledger.remove(item.ref.uid)  # never recorded: it holds nothing
        for item in written:
            self._records[item.ref.uid] = item.prepared
        specs = self._phase(written, "write CDI spec", self._write_spec, fail)
        specs = self._sync(specs, lambda: atomicfile.fsync_dir(self._cdi_root), fail)
        done = self._phase(specs, "answer", lambda item: None, fail)
        if len(done) < len(planned):
            self._resync()
        for item in done:
            _in_context(item.ref, lambda r, i=item: self._prepared_done(i))
            answers[item.ref.uid] = item.prepared.result
        return answers

    def _prepared_done(self, item: _Planned) -> None:
        log.info("prepared %s: %s", _label(item.ref), [u.cdi_id for u in item.prepared.units])
        self._report_status(item.ref, item.prepared)

    def _phase(
        self,
        items: list[Item],
        step: str,
        act: Callable[[Item], None],
        fail: Callable[[Item, Exception], None],
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
            if _in_context(item.ref, lambda r, i=item: one(i)):
                done.append(item)
        return done

    def _sync(
        self,
        items: list[Item],
        sync: Callable[[], None],
        fail: Callable[[Item, Exception], None],
    ) -> list[Item]:
        """One fsync for the files `items` wrote; if it fails, they all failed."""
        if not items:
            return items
        try:
            sync()
        except Exception as exc:
            for item in items:
                _in_context(item.ref, lambda r, i=item, e=exc: fail(i, e))
            return []
        return items

    def _save_record(self, item: _Planned) -> None:
        self._checkpoint.mark_changing()
        self._checkpoint.save(item.prepared, sync=False)

    def _write_spec(self, item: _Planned) -> None:
        write_atomic(item.spec_path, item.prepared.spec_bytes(), CDI_SPEC_MODE, sync_dir=False)

    def _resync(self) -> None:
        """Make memory mirror the checkpoint after a failed step.

        A write or remove can fail after its rename or unlink took effect (the directory
        fsync failed), and the stamp taken at the end of the call would hide that: the
        ledger would miss a record on disk, or answer from one that is gone. So the
        records are read again from disk."""
        try:
            self._load_records()
        except Exception:  # the failures already reported are the ones that matter
            log.exception("cannot re-read the checkpoint records after a failed step")

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
            log.exception("status update of %s failed; the claim itself is fine", _label(ref))

    def _plan(self, ref: ClaimRef, fetched: _Fetched | None, progress: _Progress) -> PreparedClaim:
        """Everything up to the first side effect: fetch, parse, plan, check."""
        progress.step = "fetch claim"
        if fetched is None:  # recorded when prepare() looked, gone after the refresh
            fetched = self._source.get(ref.namespace, ref.name)
        if isinstance(fetched, Exception):
            raise fetched
        raw = fetched
        progress.step = "read allocation"
        allocation = parse_claim(raw, self._driver, ref)
        progress.step = "read inventory"
        inventory = self._inventory()
        progress.step = "plan"
        prepared = plan_prepare(allocation, inventory, self._driver, self._rules)
        progress.step = "check capacity"
        problems = self._ledger.check(prepared)
        if problems:
            raise ClaimError(f"{allocation.label}: " + "; ".join(problems))
        if self._device_hook is not None:
            progress.step = "device hook"
            self._run_device_hook(allocation.label, prepared)
        return prepared

    def _run_device_hook(self, label: str, prepared: PreparedClaim) -> None:
        """Give the hook each device once, before any side effect; its exception becomes
        this claim's error (fault injection uses this to fail or delay a prepare)."""
        assert self._device_hook is not None
        for pool, device in dict.fromkeys((u.pool, u.device) for u in prepared.units):
            try:
                self._device_hook(pool, device)
            except Exception as exc:  # reported as the claim's error
                raise ClaimError(f"{label}: {exc}") from exc

    def _ensure_spec(self, claim: PreparedClaim) -> None:
        """Make the claim's CDI file hold the recorded content; untouched when it does."""
        path = safe_child(self._cdi_root, claim.cdi_file)
        wanted = claim.spec_bytes()
        try:
            if path.read_bytes() == wanted:
                return
        except FileNotFoundError:
            pass
        log.info("restoring CDI spec %s of %s", path, _label(claim.claim))
        write_atomic(path, wanted, CDI_SPEC_MODE)

    # --- unprepare ----------------------------------------------------------------

    def _unprepare_all(self, refs: list[ClaimRef]) -> dict[str, UnprepareResult]:
        """CDI specs first (one directory fsync), then the records (one directory fsync):
        a record may outlive its CDI file (restart re-creates the file), never the other
        way round."""
        answers: dict[str, UnprepareResult] = {}
        items: dict[str, _Removal] = {}
        for ref in refs:
            if ref.uid in answers or ref.uid in items:
                continue
            try:
                self._record_path(ref)
                spec_path = self._spec_path(ref)
            except ClaimError as exc:
                # Nothing can have been prepared under a UID that is not a safe file name,
                # so there is nothing to undo; an error would make the kubelet retry forever.
                log.warning("unprepare: nothing to do for %s", exc)
                answers[ref.uid] = UnprepareResult()
                continue
            items[ref.uid] = _Removal(
                ref, _Progress("remove CDI spec"), self._records.get(ref.uid), spec_path)

        def fail(item: _Removal, exc: Exception) -> None:
            log.exception("unprepare of %s failed at step %r", _label(item.ref),
                          item.progress.step)
            answers[item.ref.uid] = UnprepareResult(error=item.progress.failure(item.ref, exc))

        pending = list(items.values())
        specs = self._phase(pending, "remove CDI spec", self._remove_spec, fail)
        if any(i.spec_removed for i in specs):  # nothing to sync for unknown claims
            specs = self._sync(specs, lambda: atomicfile.fsync_dir(self._cdi_root), fail)
        removed = [i for i in specs if i.ref.uid not in self._corrupt]
        corrupt = [i for i in specs if i.ref.uid in self._corrupt]
        done = self._phase(corrupt, "move corrupt checkpoint record aside", self._set_aside, fail)
        gone = self._phase(removed, "remove checkpoint", self._remove_record, fail)
        done += (self._sync(gone, self._checkpoint.sync, fail)
                 if any(i.record_removed for i in gone) else gone)
        if len(done) < len(pending):
            self._resync()
        for item in done:
            self._records.pop(item.ref.uid, None)
            self._reservations.pop(item.ref.uid, None)
            self._ledger.remove(item.ref.uid)
            _in_context(item.ref, lambda r: self._report_status(r, None))
            answers[item.ref.uid] = UnprepareResult()
        return answers

    def _remove_spec(self, item: _Removal) -> None:
        recorded = item.recorded
        if recorded is not None and recorded.cdi_file != item.spec_path.name:
            item.spec_removed |= remove_durable(
                safe_child(self._cdi_root, recorded.cdi_file), sync_dir=False)
        item.spec_removed |= remove_durable(item.spec_path, sync_dir=False)

    def _set_aside(self, item: _Removal) -> None:
        self._checkpoint.mark_changing()
        moved = self._checkpoint.quarantine(item.ref.uid)
        log.warning("unprepared %s; corrupt record kept as %s", _label(item.ref), moved)
        del self._corrupt[item.ref.uid]

    def _remove_record(self, item: _Removal) -> None:
        uid = item.ref.uid
        if uid in self._records or self._checkpoint.path_for(uid).exists():
            self._checkpoint.mark_changing()
            item.record_removed = self._checkpoint.remove(uid, sync=False)

    # --- start-up -----------------------------------------------------------------

    def _recover(self) -> None:
        """Load the checkpoint and make the CDI directory agree with it."""
        self._checkpoint.remove_temp_files()
        self._load_records()
        self._remove_orphan_specs()
        for claim in self._records.values():
            try:
                self._ensure_spec(claim)
            except Exception:
                # Not fatal for the node: the next prepare of this claim retries the write.
                log.exception("cannot restore the CDI spec of %s", _label(claim.claim))

    def _load_records(self) -> None:
        """Records, corrupt records and the ledger, as the checkpoint has them now.

        An unreadable record keeps the devices its CDI spec names reserved (fail closed),
        with the counters the inventory says they consume."""
        records, problems = self._checkpoint.load_all()
        ledger = CapacityLedger.rebuild(records.values())
        reservations = {}
        for problem in problems:
            held = reservation(self._cdi_root, self._driver, problem.uid)
            ledger.reserve(problem.uid, self._with_counters(held))
            reservations[problem.uid] = held
            log.error(
                "%s; kept on disk, the claim cannot be prepared until unprepared; %s",
                problem, held.describe(),
            )
        self._records = records
        self._corrupt = {p.uid: p for p in problems}
        self._reservations = reservations
        self._ledger = ledger

    def _with_counters(self, held: Reservation) -> list[tuple[str, str, Any]]:
        try:
            inventory = self._inventory()
        except Exception:  # without an inventory the devices are still held, counters not
            log.exception("no inventory for the counters of unreadable record %s", held.claim_uid)
            return [(pool, device, {}) for pool, device in held.devices]
        return [(p, d, device_counters(inventory, p, d)) for p, d in held.devices]

    def _remove_orphan_specs(self) -> None:
        for path in sorted(self._cdi_root.iterdir()):
            name = path.name
            if name.startswith(f".{self._spec_prefix}") and name.endswith(TEMP_SUFFIX):
                remove_durable(path)  # an interrupted spec write
                continue
            uid = claim_uid_of_file(self._driver, name)
            if uid is None or uid in self._records or uid in self._corrupt:
                continue
            log.warning("removing orphan CDI spec %s (no checkpoint record)", path)
            remove_durable(path)

    # --- names --------------------------------------------------------------------

    def _spec_path(self, ref: ClaimRef) -> Path:
        try:
            return safe_child(self._cdi_root, spec_file_name(self._driver, ref.uid))
        except ValueError as exc:
            raise ClaimError(
                f"{_label(ref)}: claim uid is not usable in file names: {exc}"
            ) from None

    def _record_path(self, ref: ClaimRef) -> Path:
        try:
            return self._checkpoint.path_for(ref.uid)
        except ValueError as exc:
            raise ClaimError(
                f"{_label(ref)}: claim uid is not usable in file names: {exc}"
            ) from None


@dataclass
class _Item:
    """A claim of a batch, and the step it is at."""

    ref: ClaimRef
    progress: _Progress


@dataclass
class _Planned(_Item):
    """A claim to prepare that passed its checks and waits for its files."""

    prepared: PreparedClaim
    spec_path: Path


@dataclass
class _Removal(_Item):
    """A claim to unprepare: its spec file, and its record if it has one."""

    recorded: PreparedClaim | None
    spec_path: Path
    spec_removed: bool = False  # whether a directory fsync is owed for it
    record_removed: bool = False


Item = TypeVar("Item", bound=_Item)


class _Progress:
    """The step a prepare/unprepare is at, so that an error can name it."""

    def __init__(self, step: str) -> None:
        self.step = step

    def failure(self, ref: ClaimRef, exc: Exception) -> str:
        """The per-claim error text for an unexpected exception at the current step."""
        return clip_error(f"{_label(ref)}: step {self.step}: {type(exc).__name__}: {clip(exc)}")


def _in_context(ref: ClaimRef, work: Callable[[ClaimRef], T]) -> T:
    """Run `work(ref)` with the claim's identity on every log line it emits."""
    with log_context(claim=f"{ref.namespace}/{ref.name}", claim_uid=ref.uid):
        return work(ref)


def _label(ref: ClaimRef) -> str:
    return claim_label(ref.namespace, ref.name, ref.uid)
