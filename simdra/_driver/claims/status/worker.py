"""Claim status writes off the prepare path.

Writing `status.devices` is a read and a patch on the API server per claim. Done inside
prepare it would hold the node-wide serialization lock while the API server answers, so
one slow API server would stall every prepare and unprepare on the node. Here the
preparer only records what each claim's status should be; one background thread
writes it.

Only the latest wanted state of a claim is kept: a write superseded before it ran is
skipped, so an unprepare's removal can never be overtaken by the earlier prepare's
entries. A failed write is retried after `retry_seconds`, unless superseded meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from simdra._driver.claims.plan.prepared import PreparedClaim
from simdra._driver.claims.types import ClaimRef

if TYPE_CHECKING:
    from simdra._driver.claims.status.writer import ClaimStatusWriter
    from simdra._driver.kubeapi import RestClient

log = logging.getLogger(__name__)

_Wanted = tuple[ClaimRef, PreparedClaim | None]


class StatusWriter(Protocol):
    """What the preparer tells about claims' status (`BackgroundStatusWriter` is one).

    Called inside the serialized section after the claim's files are in place; must not
    raise for API failures (the preparer logs and ignores anything that escapes).
    """

    def prepared(self, claim: PreparedClaim) -> None:
        """The claim is prepared (newly, or again with its recorded answer)."""
        ...

    def unprepared(self, ref: ClaimRef) -> None:
        """The claim is unprepared (or was never prepared here)."""
        ...


class StatusSync(Protocol):
    """Writes one claim's status as wanted (`ClaimStatusWriter`); True when done."""

    def sync(self, ref: ClaimRef, prepared: PreparedClaim | None) -> bool:
        """Make the claim's status.devices match `prepared` (None: our entries gone)."""
        ...


class DeferredStatusWriter:
    """A ClaimStatusWriter over a client that is still being built: the first write
    waits for it (on the background thread, never on a prepare)."""

    def __init__(self, client_of: Callable[[], RestClient], driver_name: str) -> None:
        self._client_of = client_of
        self._driver_name = driver_name
        self._writer: ClaimStatusWriter | None = None

    def sync(self, ref: ClaimRef, prepared: PreparedClaim | None) -> bool:
        """As ClaimStatusWriter.sync, once the client exists."""
        if self._writer is None:
            api_client = self._client_of()  # first: the client's import must be done
            from simdra._driver.claims.status.writer import ClaimStatusWriter

            self._writer = ClaimStatusWriter(api_client, self._driver_name)
        return self._writer.sync(ref, prepared)


class BackgroundStatusWriter:
    """The preparer's status writer: `prepared`/`unprepared` return at once."""

    def __init__(self, writer: StatusSync, retry_seconds: float = 10.0) -> None:
        self._writer = writer
        self._retry = retry_seconds
        self._cond = threading.Condition()
        self._wanted: dict[str, _Wanted] = {}  # claim UID -> latest state, oldest first
        self._due: dict[str, float] = {}  # claim UID -> earliest next attempt
        self._busy = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="claim-status", daemon=True)
        self._thread.start()

    def prepared(self, claim: PreparedClaim) -> None:
        """Publish the entries of a prepared claim (soon, in the background)."""
        self._want(claim.claim, claim)

    def unprepared(self, ref: ClaimRef) -> None:
        """Remove our entries from an unprepared claim (soon, in the background)."""
        self._want(ref, None)

    @property
    def pending(self) -> list[str]:
        """UIDs of claims whose status is not written yet (queued or failed)."""
        with self._cond:
            return sorted(self._wanted)

    def flush(self, timeout: float) -> bool:
        """Wait until every wanted status is written; False on timeout (e.g. failures)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._wanted or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self) -> None:
        """End the thread; unwritten states are dropped (logged)."""
        with self._cond:
            self._stopped = True
            if self._wanted:
                log.warning("claim status not written before stop: %s", sorted(self._wanted))
            self._cond.notify_all()
        self._thread.join()

    def _want(self, ref: ClaimRef, state: PreparedClaim | None) -> None:
        with self._cond:
            self._wanted.pop(ref.uid, None)  # re-insert: keeps the queue oldest first
            self._wanted[ref.uid] = (ref, state)
            self._due[ref.uid] = 0.0
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                job = self._next_job()
                if job is None:
                    return
                uid, wanted = job
                self._busy = True
            written = self._write(*wanted)
            with self._cond:
                self._busy = False
                if self._wanted.get(uid) is wanted:  # not superseded while writing
                    if written:
                        del self._wanted[uid]
                        self._due.pop(uid, None)
                    else:
                        self._due[uid] = time.monotonic() + self._retry
                self._cond.notify_all()

    def _next_job(self) -> tuple[str, _Wanted] | None:
        """The oldest due claim, waiting for one; None once stopped. Holds the lock."""
        while not self._stopped:
            now = time.monotonic()
            due = [uid for uid in self._wanted if self._due.get(uid, 0.0) <= now]
            if due:
                return due[0], self._wanted[due[0]]
            waits = [self._due[uid] - now for uid in self._wanted]
            self._cond.wait(min(waits) if waits else None)
        return None

    def _write(self, ref: ClaimRef, state: PreparedClaim | None) -> bool:
        try:
            self._writer.sync(ref, state)
            return True
        except Exception as exc:
            log.warning("status of claim %s/%s (uid %s) not written, will retry in %gs: %s",
                        ref.namespace, ref.name, ref.uid, self._retry, exc)
            return False
