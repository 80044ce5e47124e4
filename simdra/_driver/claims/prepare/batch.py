"""The side effects of a prepare or unprepare batch, phase by phase (group commit).

Each step runs for every claim of the batch before the next, and each directory fsync is
shared by the batch:

prepare:   contents of records and CDI specs under temp names, written and fsynced at once
           (`simdra._driver.claims.claim_files`) -> records in place -> fsync of their
           directory -> device metadata files (what the specs mount) -> CDI specs in
           place -> fsync of theirs
unprepare: CDI specs -> fsync of their directory -> device metadata -> records (or
           corrupt records set aside) -> fsync of theirs

Every claim keeps the order of `simdra._driver.claims.preparer`'s docstring, so its crash
promise holds claim by claim. A failure fails its claim (a failed fsync: every claim
whose file it was to make durable), and memory is then re-read from disk, since a rename
or unlink can have taken effect before the step that failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from simdra._driver import atomicfile
from simdra._driver.atomicfile import remove_durable, safe_child
from simdra._driver.claims.claim_files import ClaimFiles, write_and_place_records
from simdra._driver.claims.metadata_files import remove_metadata, write_metadata
from simdra._driver.claims.prepare_items import PREPARER_LOG as log
from simdra._driver.claims.prepare_items import Item, Planned, Removal, in_item_context, label
from simdra._driver.claims.prepared_store import PreparedStore
from simdra._driver.core.textlimits import one_line

FaultHook = Callable[[str], None]
# Called for an item whose step raised; the batch goes on without it.
Failure = Callable[[Item, Exception], None]


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
