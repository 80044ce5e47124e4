"""Reconciliation: unprepare what the kubelet will never unprepare (the side-effect half;
the decision is `driver.claims.reconcile_plan`).

The kubelet unprepares only the claims its own checkpoint (`dra_manager_state`) lists.
When it loses that state, or a node keeps the plugin's data directory over a reimage,
a record outlives its claim and keeps the device held: the scheduler allocates the
device again and every prepare of it fails. So at start-up, and every `interval`
seconds (`ReconcilePolicy`), the claims of the records due are read from the API
server (one GET each, the permission the plugin already has; a claim found in use is
read less and less often, see `due_reads`) and a record that has been leaked long
enough is unprepared through `Preparer.reclaim`, the path NodeUnprepareResources
takes: CDI spec, then record, and the ledger frees the devices.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from driver.claims.errors import ClaimNotFound, claim_label
from driver.claims.reconcile_plan import (
    FAILED,
    FOUND,
    GONE,
    InUse,
    Reclaim,
    ReconcilePolicy,
    RecordedClaim,
    Suspect,
    due_reads,
    plan_reconcile,
)
from driver.claims.source import ClaimSource
from driver.claims.types import ClaimRef, UnprepareResult
from driver.core.textlimits import one_line

log = logging.getLogger(__name__)


class Reclaimer(Protocol):
    """The preparer as reconciliation uses it."""

    def recorded(self) -> dict[str, RecordedClaim]:
        """The prepared claims and when each was last prepared."""
        ...

    def reclaim(self, claims: list[Reclaim]) -> dict[str, UnprepareResult]:
        """Unprepare these claims unless prepared since their `since`."""
        ...


class ClaimReconciler:
    """Checks the records against the API server; `check()` is one pass, `start()` runs
    one now and then one every `policy.interval` seconds on a thread until `stop()`.

    `on_reclaimed(claim, reason)` is called for every claim unprepared, `on_read(result)`
    for every claim read (FOUND, GONE or FAILED; the plugin counts both); `clock` is the
    wall clock the records' times are in.
    """

    def __init__(
        self,
        preparer: Reclaimer,
        source: ClaimSource,
        *,
        driver: str,
        node: str,
        policy: ReconcilePolicy,
        on_reclaimed: Callable[[ClaimRef, str], None] | None = None,
        on_read: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._preparer = preparer
        self._source = source
        self._driver = driver
        self._node = node
        self._policy = policy
        self._on_reclaimed = on_reclaimed
        self._on_read = on_read
        self._clock = clock
        self._suspects: Mapping[str, Suspect] = {}
        self._in_use: Mapping[str, InUse] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> list[Reclaim]:
        """One pass: read the claims of the records due, plan, unprepare what is due;
        returns the claims unprepared."""
        now = self._clock()
        records = self._preparer.recorded()
        due = due_reads(records, self._suspects, self._in_use, now, self._policy)
        seen = self._read({uid: records[uid] for uid in due})
        plan = plan_reconcile(records, seen, self._suspects, now, driver=self._driver,
                              node=self._node, policy=self._policy, in_use=self._in_use)
        self._suspects, self._in_use = plan.suspects, plan.in_use
        if not plan.reclaim:
            return []
        answers = self._preparer.reclaim(list(plan.reclaim))
        done = []
        for item in plan.reclaim:
            answer = answers.get(item.ref.uid)
            if answer is None:
                continue  # prepared again, or unprepared by the kubelet, in the meantime
            if answer.error:
                log.warning("reconcile: unprepare of leaked %s (%s) failed: %s",
                            _label(item.ref), item.reason, answer.error)
                continue
            log.info("reconcile: unprepared %s: %s; its devices are free",
                     _label(item.ref), item.reason)
            done.append(item)
            if self._on_reclaimed is not None:
                self._on_reclaimed(item.ref, item.reason)
        return done

    def _read(self, records: Mapping[str, RecordedClaim]) -> dict[str, Mapping[str, Any] | None]:
        seen: dict[str, Mapping[str, Any] | None] = {}
        for uid, record in records.items():
            if self._stopped.is_set():
                break
            ref = record.ref
            try:
                seen[uid] = self._source.get(ref.namespace, ref.name)
                result = FOUND
            except ClaimNotFound:
                seen[uid] = None
                result = GONE
            except Exception as exc:  # unknown now: the plan starts this claim over
                log.warning("reconcile: cannot read %s: %s", _label(ref), one_line(exc))
                result = FAILED
            if self._on_read is not None:
                self._on_read(result)
        return seen

    def start(self) -> None:
        """Check now and then every `policy.interval` seconds, on a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="claim-reconciler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (a check in progress finishes its current step first)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.check()
            except Exception:  # one failed pass must not end reconciliation
                log.exception("reconcile: check of the prepared claims failed")
            self._stopped.wait(self._policy.interval)


def _label(ref: ClaimRef) -> str:
    return claim_label(ref.namespace, ref.name, ref.uid)
