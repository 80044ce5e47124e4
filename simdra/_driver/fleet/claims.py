"""The node side of claims on fleet nodes (side effects): what the plugin does after a
prepare that the API can see.

A claim allocated by our driver on a played node (a result's pool is the node's), and
reserved for a pod, is prepared `prepare_latency` seconds after the fleet sees it:
planned by the plugin's own `plan_prepare` against the node's current inventory,
checked against and added to the node's `CapacityLedger`, and its `status.devices`
written per device and share by the plugin's `ClaimStatusWriter` (server-side apply,
the driver as field manager). Once the claim is reserved for no pod, deallocated or
deleted, the node's ledger frees it and our status entries are removed.

A few worker threads do the writes in due order: one claim is never handled by two at
once, and a node's claims are handled one at a time (its ledger's check and add belong
together), while different nodes' go in parallel. A write that fails is retried with
backoff, the claim's state kept, so an API server outage delays status, never loses it.
After a restart, claims already written are planned again and their status compared,
not rewritten (`ClaimStatusWriter.sync` writes only a difference).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Any

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.status.writer import ClaimStatusWriter
from simdra._driver.claims.types import ClaimError, ClaimRef
from simdra._driver.fleet.parts import FleetParts
from simdra._driver.fleet.watch import ListWatch

log = logging.getLogger("simdra._driver.fleet")
JSON = dict[str, Any]
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


class ClaimTracker:
    """Claims of played nodes: watched, prepared after a latency, freed when unused."""

    def __init__(self, fleet: FleetParts, prepare_latency: float, workers: int = 4) -> None:
        self._fleet, self._latency = fleet, prepare_latency
        self._driver = fleet.config.driver_name
        self._writer = ClaimStatusWriter(fleet.client, self._driver)
        self._cond = threading.Condition()
        self._claims: dict[str, JSON] = {}  # uid -> latest object (guarded by _cond)
        self._due: list[tuple[float, int, str]] = []  # (when, seq, uid) heap
        self._seq = itertools.count()
        self._busy: set[str] = set()  # uids a worker holds (guarded by _cond)
        self._again: set[str] = set()  # busy uids that came due meanwhile (guarded by _cond)
        self._attempts: dict[str, int] = {}  # guarded by _cond
        self._node_locks: dict[str, threading.Lock] = {}  # guarded by _cond
        # Each node's entries are changed only under that node's lock.
        self._prepared: dict[str, tuple[str, ClaimRef]] = {}  # uid -> (node, ref)
        self._ledgers: dict[str, CapacityLedger] = {}  # node -> ledger
        self._watch = ListWatch(fleet.client, CLAIMS, fleet.stop_event, on_list=self._listed,
                                on_event=self._event, backoff=fleet.backoff,
                                name="fleet-claims-watch")
        self._workers = [threading.Thread(target=self._work, name=f"fleet-claims-{i}",
                                          daemon=True) for i in range(workers)]

    def start(self) -> None:
        """Start watching claims and writing their status."""
        self._watch.start()
        for worker in self._workers:
            worker.start()

    def stop(self) -> None:
        """Wait for the threads (the fleet's stop event ends them)."""
        with self._cond:
            self._cond.notify_all()
        self._watch.stop()
        for worker in self._workers:
            if worker.is_alive():
                worker.join(10)

    # -- the watch's side: record and schedule ------------------------------------------

    def _listed(self, items: list[JSON]) -> None:
        with self._cond:
            seen = {str(item["metadata"]["uid"]) for item in items}
            for uid in set(self._claims) - seen:
                self._claims.pop(uid, None)
                self._schedule(uid, 0.0)
            for item in items:
                self._record(item)

    def _event(self, kind: str, obj: JSON) -> None:
        with self._cond:
            if kind == "DELETED":
                uid = str(obj["metadata"]["uid"])
                self._claims.pop(uid, None)
                self._schedule(uid, 0.0)
            else:
                self._record(obj)

    def _record(self, claim: JSON) -> None:
        """Keep the claim if it concerns a played node, and schedule its work."""
        uid = str(claim["metadata"]["uid"])
        if self._node_of(claim) is None:
            if self._claims.pop(uid, None) is not None:
                self._schedule(uid, 0.0)
            return
        self._claims[uid] = claim
        self._schedule(uid, self._latency if _in_use(claim) else 0.0)

    def _schedule(self, uid: str, delay: float) -> None:
        heapq.heappush(self._due, (time.monotonic() + delay, next(self._seq), uid))
        self._cond.notify()

    def _node_of(self, claim: JSON) -> str | None:
        results = ((((claim.get("status") or {}).get("allocation") or {})
                    .get("devices") or {}).get("results") or [])
        for result in results:
            if result.get("driver") == self._driver:
                node = self._fleet.state.node_of_pool(str(result.get("pool")))
                if node is not None:
                    return node
        return None

    # -- the worker's side: prepare and free --------------------------------------------

    def _work(self) -> None:
        stop = self._fleet.stop_event
        while not stop.is_set():
            with self._cond:
                uid, claim = self._next_due(stop)
            if uid is None:
                continue
            failure: Exception | None = None
            try:
                self._settle(uid, claim)
            except Exception as exc:
                failure = exc
            self._done(uid, failure)

    def _next_due(self, stop: threading.Event) -> tuple[str | None, JSON | None]:
        """The next claim whose time has come and no other worker holds (now held by this
        one), with its latest object (None: gone)."""
        while not stop.is_set():
            now = time.monotonic()
            if self._due and self._due[0][0] <= now:
                _when, _seq, uid = heapq.heappop(self._due)
                if uid in self._busy:
                    self._again.add(uid)  # its holder schedules it again when done
                    continue
                self._busy.add(uid)
                return uid, self._claims.get(uid)
            self._cond.wait(self._due[0][0] - now if self._due else None)
        return None, None

    def _done(self, uid: str, failure: Exception | None) -> None:
        with self._cond:
            self._busy.discard(uid)
            if failure is not None:
                self._retry_later(uid, failure)
                return
            self._attempts.pop(uid, None)
            if uid in self._again:
                self._again.discard(uid)
                self._schedule(uid, 0.0)

    def _settle(self, uid: str, claim: JSON | None) -> None:
        """Make the node side match the claim: prepared while in use, else freed."""
        node = self._node_of(claim) if claim is not None else None
        held = self._prepared.get(uid)
        where = held[0] if held else node
        if where is None:
            return
        with self._node_lock(where):
            wanted = claim is not None and node is not None and _in_use(claim)
            if uid in self._prepared and not wanted:
                self._free(uid, gone=claim is None)
            elif wanted and uid not in self._prepared and claim is not None and node:
                self._prepare(uid, claim, node)

    def _node_lock(self, node: str) -> threading.Lock:
        with self._cond:
            return self._node_locks.setdefault(node, threading.Lock())

    def _prepare(self, uid: str, claim: JSON, node: str) -> None:
        inventory = self._fleet.state.inventory(node)
        if inventory is None:
            return  # the node left: nothing to prepare
        try:
            prepared = plan_prepare(parse_claim(claim, self._driver), inventory, self._driver)
        except ClaimError as err:
            log.warning("fleet: cannot prepare on %s: %s", node, err)
            return
        ledger = self._ledgers.setdefault(node, CapacityLedger())
        problems = ledger.check(prepared)
        if problems:
            log.warning("fleet: %s: %s", prepared.claim, "; ".join(problems))
            return
        self._writer.sync(prepared.claim, prepared)
        ledger.add(prepared)
        self._prepared[uid] = (node, prepared.claim)
        self._fleet.metrics.prepared.inc()
        log.debug("fleet: prepared %s on %s", prepared.claim, node)

    def _free(self, uid: str, gone: bool) -> None:
        node, ref = self._prepared[uid]
        if not gone:
            self._writer.sync(ref, None)
        self._ledgers[node].remove(uid)
        del self._prepared[uid]
        self._fleet.metrics.unprepared.inc()
        log.debug("fleet: freed %s on %s", ref, node)

    def _retry_later(self, uid: str, exc: Exception) -> None:
        """Schedule a failed claim again after a backoff (holding the condition)."""
        attempt = self._attempts.get(uid, 0)
        self._attempts[uid] = attempt + 1
        self._again.discard(uid)
        delay = self._fleet.backoff.delay(attempt, getattr(exc, "retry_after", None))
        log.warning("fleet: claim %s: %s; again in %.2fs", uid,
                    " ".join(str(exc).split())[:200], delay)
        self._schedule(uid, delay)

    def ledger(self, node: str) -> CapacityLedger | None:
        """The node's ledger (for tests and metrics; the worker owns it)."""
        return self._ledgers.get(node)


def _in_use(claim: JSON) -> bool:
    """Reserved for a pod and not being deleted: the kubelet would have prepared it."""
    status = claim.get("status") or {}
    return bool(status.get("reservedFor")) and not claim["metadata"].get("deletionTimestamp")
