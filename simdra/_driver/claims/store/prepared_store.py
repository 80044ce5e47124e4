"""The prepared claims on disk (checkpoint records, CDI spec files) and their mirror in
memory (records, corrupt records, reservations, capacity ledger), for the preparer.

Memory is the source of truth while the process lives; it is loaded from disk at
start-up (`recover`, which also makes the CDI directory agree with the records), when
another instance changed the checkpoint (`refresh`), and after a failed step (`resync`).

Device metadata files on disk (`write_metadata`, `remove_metadata`; what they hold and
where is `simdra._driver.claims.plan.metadata`): written before the CDI spec that mounts
them is put in place, restored with it, removed after it. A file is rewritten only when
its content changed, and then with the next generation, so a container reading it twice
can tell an update from a re-read. Files are written atomically (a reader never sees
half a file) but their directories are not fsynced: a file lost in a crash is written
again from the record before the spec is restored. They live in the store's own
directory (`<data dir>/dra-device-metadata`, never one a record names), and nothing here
follows a link: each level is a real directory or refused, a tree is removed entry by
entry without entering a link (`simdra._driver.core.nofollow.remove_tree`), and only
names the plugin writes (claim UIDs) are listed or removed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from simdra._driver.atomicfile import (
    TEMP_SUFFIX,
    make_directory,
    remove_durable,
    safe_child,
    write_atomic,
)
from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.cdi import (
    CDI_DIR_MODE,
    CDI_SPEC_MODE,
    claim_uid_of_file,
    spec_file_name,
    spec_file_prefix,
)
from simdra._driver.claims.plan.metadata import (
    HOST_SUBDIR,
    RequestMetadata,
    encode_stream,
    host_dir,
    host_path,
    stream_generation,
    without_generation,
)
from simdra._driver.claims.plan.prepared import InventoryProvider, PreparedClaim, device_counters
from simdra._driver.claims.reconcile.plan import RecordedClaim
from simdra._driver.claims.store.checkpoint import Checkpoint, CorruptRecord, Stamp, trusted_for
from simdra._driver.claims.store.reserved import MAX_SPEC_BYTES, Reservation, reservation
from simdra._driver.claims.types import ClaimError, ClaimRef, claim_label
from simdra._driver.core.nofollow import (
    open_directory,
    read_regular,
    real_directory,
    remove_tree,
)
from simdra._driver.core.textlimits import one_line
from simdra._driver.core.validation.names import uuid_errors

# One logger for everything a prepare or unprepare logs, whichever module writes it (the
# transaction, its batch, this store): operators and log pipelines select the
# preparer's lines by this name.
PREPARE_LOG = logging.getLogger("simdra._driver.claims.prepare")
log = PREPARE_LOG

METADATA_FILE_MODE = 0o644  # containers of any user read it, through a read-only mount
METADATA_DIR_MODE = 0o755
# A stream is a few KiB; more than this was not written by the plugin.
MAX_METADATA_BYTES = 4 << 20


class PreparedStore:
    """The checkpoint and CDI directory of one driver, and what memory holds of them.

    `records`, `corrupt`, `reservations` and `ledger` are read and updated by the
    preparer and its commit phases, right after the file they mirror is written or
    removed; a load replaces all four at once.
    """

    def __init__(
        self,
        driver_name: str,
        inventory: InventoryProvider,
        cdi_root: str | os.PathLike[str],
        data_dir: str | os.PathLike[str],
    ) -> None:
        self.driver = driver_name
        self._inventory = inventory
        self.cdi_root = make_directory(cdi_root, CDI_DIR_MODE)
        self._spec_prefix = spec_file_prefix(driver_name)  # validates the driver name
        # Absolute: CDI specs mount the device metadata files from here. Always this
        # one: a record naming another root is not trusted (`trusted_for`).
        self.metadata_root = Path(data_dir).resolve() / HOST_SUBDIR
        self.checkpoint = Checkpoint(
            data_dir, trust=trusted_for(driver_name, str(self.metadata_root)))
        self.records: dict[str, PreparedClaim] = {}
        self.corrupt: dict[str, CorruptRecord] = {}
        self.reservations: dict[str, Reservation] = {}
        self.ledger = CapacityLedger()
        # Claim UID -> when this process last answered a prepare from its record (wall
        # clock): a record's mtime says when it was written, not when it was last used.
        self.answered: dict[str, float] = {}
        self._stamp: Stamp | None = None

    # --- when memory is loaded ------------------------------------------------------

    def recover(self) -> None:
        """Load the checkpoint and make the CDI directory agree with it (start-up)."""
        self.checkpoint.remove_temp_files()
        self.load()
        self._remove_orphan_specs()
        self._remove_orphan_metadata()
        for claim in self.records.values():
            try:
                self.ensure_spec(claim)
            except Exception:
                # Not fatal for the node: the next prepare of this claim retries the write.
                log.exception("cannot restore the CDI spec of %s", _label(claim.claim))
        self.remember_stamp()

    def refresh(self) -> None:
        """Reload the records if another instance changed them since our last call.

        The checkpoint's stamp (a generation token every writer changes before touching
        a record, and the records directory's timestamps) costs a read of a small file
        and a stat, whatever the number of claims."""
        stamp = self.checkpoint.stamp()
        if stamp == self._stamp:
            return
        log.info("checkpoint changed by another instance; reloading the claim records")
        self.load()
        self._stamp = stamp

    def remember_stamp(self) -> None:
        """Note the checkpoint's stamp at the end of this instance's call."""
        self._stamp = self.checkpoint.stamp()

    def resync(self) -> None:
        """Make memory mirror the checkpoint after a failed step.

        A write or remove can fail after its rename or unlink took effect (the directory
        fsync failed), and the stamp taken at the end of the call would hide that: the
        ledger would miss a record on disk, or answer from one that is gone. So the
        records are read again from disk."""
        try:
            self.load()
        except Exception:  # the failures already reported are the ones that matter
            log.exception("cannot re-read the checkpoint records after a failed step")

    def load(self) -> None:
        """Records, corrupt records and the ledger, as the checkpoint has them now.

        An unreadable record keeps the devices its CDI spec names reserved (fail closed),
        with the counters the inventory says they consume."""
        records, problems = self.checkpoint.load_all()
        ledger = CapacityLedger.rebuild(records.values())
        reservations = {}
        for problem in problems:
            held = reservation(self.cdi_root, self.driver, problem.uid)
            ledger.reserve(problem.uid, self._with_counters(held))
            reservations[problem.uid] = held
            log.error(
                "%s; kept on disk, the claim cannot be prepared until unprepared; %s",
                problem, held.describe(),
            )
        self.records = records
        self.answered = {uid: t for uid, t in self.answered.items() if uid in records}
        self.corrupt = {p.uid: p for p in problems}
        self.reservations = reservations
        self.ledger = ledger

    def forget(self, claim_uid: str) -> None:
        """Drop an unprepared claim from memory (its files are already gone)."""
        self.records.pop(claim_uid, None)
        self.answered.pop(claim_uid, None)
        self.reservations.pop(claim_uid, None)
        self.ledger.remove(claim_uid)

    # --- when a record was last used (reconciliation) -------------------------------

    def touched_at(self, claim_uid: str) -> float | None:
        """When the claim's record was written or a prepare last answered from it (wall
        clock seconds); None when it has no record (any more)."""
        try:
            written = self.checkpoint.path_for(claim_uid).lstat().st_mtime
        except (OSError, ValueError):
            return None
        return max(written, self.answered.get(claim_uid, written))

    def recorded_claims(self) -> dict[str, RecordedClaim]:
        """Every readable record with its devices and `touched_at`, for reconciliation."""
        found = {}
        for uid, claim in list(self.records.items()):
            touched = self.touched_at(uid)
            if touched is not None:
                devices = frozenset(unit.key for unit in claim.units)
                found[uid] = RecordedClaim(claim.claim, devices, touched)
        return found

    def _with_counters(self, held: Reservation) -> list[tuple[str, str, Any]]:
        try:
            inventory = self._inventory()
        except Exception:  # without an inventory the devices are still held, counters not
            log.exception("no inventory for the counters of unreadable record %s", held.claim_uid)
            return [(pool, device, {}) for pool, device in held.devices]
        return [(p, d, device_counters(inventory, p, d)) for p, d in held.devices]

    # --- CDI spec files -------------------------------------------------------------

    def ensure_spec(self, claim: PreparedClaim) -> None:
        """Make the claim's CDI file hold the recorded content, its device metadata
        files first (what the spec mounts); each untouched when it holds it already."""
        write_metadata(claim, self.driver, self.metadata_root)
        path = safe_child(self.cdi_root, claim.cdi_file)
        wanted = claim.spec_bytes()
        try:
            if read_regular(path, MAX_SPEC_BYTES) == wanted:
                return
        except OSError:
            pass  # a link or no regular file: the rename replaces it, never followed
        log.info("restoring CDI spec %s of %s", path, _label(claim.claim))
        write_atomic(path, wanted, CDI_SPEC_MODE)

    def _remove_orphan_metadata(self) -> None:
        """Remove the metadata of claims without a record; a link is never followed (a
        linked root is left alone, a link inside is unlinked), and a failure costs that
        claim's directory one WARNING line, never the start."""
        root = self.metadata_root
        try:
            uids = metadata_claims(root)
        except OSError as err:
            log.warning("device metadata directory not swept: %s; replace it with a "
                        "directory of the plugin's own", one_line(err))
            return
        for uid in uids:
            if uid in self.records or uid in self.corrupt:
                continue
            log.warning("removing orphan device metadata of claim uid %s (no record)", uid)
            try:
                links = remove_metadata(root, uid)
            except OSError as err:
                log.warning("cannot remove orphan device metadata of claim uid %s: %s",
                            uid, one_line(err))
                continue
            if links:
                log.warning("device metadata of claim uid %s held symlinks, removed "
                            "themselves, not followed: %s", uid, one_line(", ".join(links)))

    def _remove_orphan_specs(self) -> None:
        for path in sorted(self.cdi_root.iterdir()):
            name = path.name
            if name.startswith(f".{self._spec_prefix}") and name.endswith(TEMP_SUFFIX):
                remove_durable(path)  # an interrupted spec write
                continue
            uid = claim_uid_of_file(self.driver, name)
            if uid is None or uid in self.records or uid in self.corrupt:
                continue
            log.warning("removing orphan CDI spec %s (no checkpoint record)", path)
            remove_durable(path)

    # --- file names -----------------------------------------------------------------

    def spec_path(self, ref: ClaimRef) -> Path:
        """Where the claim's CDI spec file is; ClaimError when its UID is no file name."""
        try:
            return safe_child(self.cdi_root, spec_file_name(self.driver, ref.uid))
        except ValueError as exc:
            raise ClaimError(
                f"{_label(ref)}: claim uid is not usable in file names: {exc}"
            ) from None

    def record_path(self, ref: ClaimRef) -> Path:
        """Where the claim's checkpoint record is; ClaimError when its UID is no file name."""
        try:
            return self.checkpoint.path_for(ref.uid)
        except ValueError as exc:
            raise ClaimError(
                f"{_label(ref)}: claim uid is not usable in file names: {exc}"
            ) from None

    # --- the checks of a prepare ------------------------------------------------------

    def refuse_corrupt(self, ref: ClaimRef) -> None:
        """ClaimError when the claim's record cannot be read: preparing it again could
        double-book what the unreadable record holds."""
        if ref.uid in self.corrupt:
            raise ClaimError(
                f"{_label(ref)}: {self.corrupt[ref.uid]}; not preparing it again "
                "(an unprepare of the claim moves the record aside)"
            )


def _label(ref: ClaimRef) -> str:
    return claim_label(ref.namespace, ref.name, ref.uid)


# --- device metadata files ---------------------------------------------------------


def write_metadata(claim: PreparedClaim, driver_name: str, root: str | Path) -> None:
    """Write every request's metadata file of `claim` that is missing or differs, under
    `root` (the store's own directory, whatever the claim's record says); OSError (one
    line) when a level of the tree is a symlink or not a directory."""
    for request in claim.metadata(driver_name):
        directory = host_dir(str(root), claim.claim.uid, request.request)
        for level in (Path(root), Path(directory).parent, Path(directory)):
            real_directory(level, METADATA_DIR_MODE)
        path = Path(host_path(str(root), claim.claim.uid, request.request, driver_name,
                              dir_mount=claim.metadata_dir_mount))
        _write_request(path, claim, request)


def remove_metadata(root: str | Path, claim_uid: str) -> list[str]:
    """Remove the claim's metadata directory, never through a link; the symlinks found
    and unlinked there (empty: none). Nothing to do when `root` does not exist;
    NotADirectoryError when it is a link."""
    safe_child(root, claim_uid)  # a checked name
    try:
        return remove_tree(root, claim_uid)
    except FileNotFoundError:
        return []


def metadata_claims(root: str | Path) -> list[str]:
    """The claim UIDs with an entry under `root`, links included (they are removed, never
    followed); other names are not the plugin's and are left alone. Empty when `root`
    does not exist; NotADirectoryError (one line) when it is a symlink or a file."""
    try:
        fd = open_directory(root)
    except FileNotFoundError:
        return []
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    return sorted(name for name in names if not uuid_errors(name, "uid"))


def _write_request(path: Path, claim: PreparedClaim, request: RequestMetadata) -> None:
    ref = claim.claim
    identity = (ref.namespace, ref.name, ref.uid)
    try:
        old: bytes | None = read_regular(path, MAX_METADATA_BYTES)
    except OSError:
        old = None  # a link or no file: replaced by the rename, never followed
    generation = 1
    if old is not None:
        current = stream_generation(old)
        wanted = encode_stream(identity, claim.pod_claim_name, request, current or 1)
        if current and without_generation(old) == without_generation(wanted):
            return  # says what it should: a rewrite would bump the generation for nothing
        generation = current + 1
    data = encode_stream(identity, claim.pod_claim_name, request, generation)
    write_atomic(path, data, METADATA_FILE_MODE, sync_dir=False)
