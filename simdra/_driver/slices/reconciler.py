"""The publisher's worker thread: plan each pool that needs it, write the plan, verify it.

Each pass takes the work queue's pending work, adopts a new inventory (`validated`),
and for each pool to look at plans the difference between the desired and the observed
slices (`diff.plan_pool`, pure), sends it (`writes`), then plans again at once to check
the result (normally an empty plan); a pool that keeps needing writes is slowed down
instead of looping. Errors back off per pool (so one pool's trouble does not delay
another): a 409 re-reads the slice and retries at once (a few times);
429/5xx/connection errors back off exponentially with jitter (capped at 30 s,
Retry-After respected). A pool whose last plan was empty is clean; the queue is synced
when nothing is pending and every valid pool is clean.

Where counter sets may go depends on the server's release (`desired.SliceLayout`), read
before the first pass. A write the server finds invalid reads it again (at most once a
minute): a control plane upgraded from 1.34 to 1.35, or rolled back, under a running
plugin refuses the old layout, and every pool is then planned in the new one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from simdra._driver.devices.model import Inventory
from simdra._driver.slices.api import ApiError, SliceApi
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.desired import SliceLayout, layout_for_release
from simdra._driver.slices.diff import PoolPlan, SliceTarget, plan_pool, plan_removal
from simdra._driver.slices.dropped import refusal_hint
from simdra._driver.slices.node_uid import NodeUid
from simdra._driver.slices.observed import SliceCache
from simdra._driver.slices.server_changes import ServerChanges
from simdra._driver.slices.stats import PublisherCounters
from simdra._driver.slices.validated import ValidatedPools
from simdra._driver.slices.workqueue import Work, WorkQueue
from simdra._driver.slices.writes import QUICK_RETRY_KINDS, SliceWriter

# One logger for all of the publisher's lines, as before it was split by role.
log = logging.getLogger("simdra._driver.slices.publisher")

_MAX_QUICK_RETRIES = 3
_MAX_VERIFY_ROUNDS = 3
_LAYOUT_RECHECK_SECONDS = 60.0  # between reads of /version after invalid writes


class Reconciler:
    """Keeps each pool's slices equal to its desired slices; `run()` is the thread's body.

    Its state is the worker thread's own; the parts `Publisher.stats()` reads (`pools`'
    problems, `server_changes`' reports, `node_uid.uid`) change holding `lock`.
    """

    def __init__(
        self,
        api: SliceApi,
        cache: SliceCache,
        queue: WorkQueue,
        counters: PublisherCounters,
        lock: threading.Condition,
        stop: threading.Event,
        *,
        backoff: Backoff,
        node_uid_max_age: float,
        write_concurrency: int,
        node_uid: str | None = None,
        gate: threading.Semaphore | None = None,
    ) -> None:
        self._api, self._driver, self._node = api, api.driver, api.node
        self._gate = gate
        self._cache, self._queue, self._counters = cache, queue, counters
        self._stop, self._backoff = stop, backoff
        self.pools = ValidatedPools(api.driver, api.node, lock)
        self.server_changes = ServerChanges(lock)
        self.node_uid = NodeUid(api, queue, counters, backoff, api.node, node_uid_max_age,
                                node_uid)
        self._writer = SliceWriter(api, cache, counters, self.server_changes, write_concurrency)
        self._clean: dict[str, bool] = {}  # pool -> its last plan was empty
        self._attempts: dict[str, int] = {}  # pool -> failed writes in a row
        self._verify_rounds: dict[str, int] = {}  # pool -> non-empty plans in a row
        self._layout_recheck_at = 0.0  # monotonic: when an invalid write may read /version

    def run(self) -> None:
        """Take work and run passes until stopped; a failed pass retries every pool.
        With a `gate` (shared by the publishers of one feed), a pass first waits for
        one of its places."""
        if not self._learn_layout():
            return
        while (work := self._queue.take()) is not None:
            with self._gate or contextlib.nullcontext():
                if self._stop.is_set():
                    return
                self._pass(work)

    def _pass(self, work: Work) -> None:
        try:
            self._run_pass(work)
        except Exception:  # never let a bug end publishing for good
            log.exception("slice publishing pass failed; retrying all pools")
            self._counters.count_error("internal")
            self._queue.retry_all(self._universe(), self._backoff.cap)
        self._queue.finish_pass(self._all_clean)
        if self.node_uid.given and self._all_clean():
            self.node_uid.given = False  # every pool published once by it

    def _learn_layout(self) -> bool:
        """Read the server's release once, before anything is planned: where counter sets
        may go depends on it. Retries with backoff (work waits in the queue); a server
        that refuses to say gets the current releases' layout. False once stopped."""
        attempt = 0
        while not self._stop.is_set():
            try:
                release = self._api.server_version()
            except ApiError as err:
                self._counters.count_error(err.kind)
                if err.kind in ("forbidden", "not_found", "invalid"):
                    log.warning("%s; publishing as for the current releases", err)
                    return True
                delay = self._backoff.delay(attempt, err.retry_after)
                attempt += 1
                log.warning("cannot publish slices yet: %s; retrying in %.1fs", err, delay)
                self._stop.wait(delay)
                continue
            self.pools.layout = layout_for_release(release)
            log.info("API server %s: counter sets published %s", release or "(no version)",
                     _placement(self.pools.layout))
            self._layout_recheck_at = time.monotonic() + _LAYOUT_RECHECK_SECONDS
            return True
        return False

    def _relayout(self) -> bool:
        """After an invalid write: has the server's release, and with it where counter
        sets may go, changed? If so, plan every pool in the new layout; True then. Reads
        /version at most once a minute (a pool invalid for another reason stays on its
        backoff)."""
        now = time.monotonic()
        if now < self._layout_recheck_at:
            return False
        self._layout_recheck_at = now + _LAYOUT_RECHECK_SECONDS
        try:
            release = self._api.server_version()
        except ApiError as err:
            self._counters.count_error(err.kind)
            return False
        layout = layout_for_release(release)
        if layout is self.pools.layout:
            return False
        log.warning("API server is now %s: counter sets published %s; planning every pool "
                    "again", release, _placement(layout))
        changed = self.pools.relayout(layout, self.node_uid.uid)
        for name in changed:
            self._clean.pop(name, None)
            self._attempts.pop(name, None)
            self.server_changes.forget(name)
        self._queue.signal(changed, urgent=True)
        return True

    def _run_pass(self, work: Work) -> None:
        pools = set(work.pools)
        if work.inventory is not None:
            pools |= self._apply_inventory(work.inventory)
        if work.all_pools:
            pools |= self._universe()
        pools -= set(self.pools.problems)  # invalid pools: reported, left as they are
        pools = self._queue.due(pools, time.monotonic())
        if not pools:
            return
        if not self.node_uid.ensure(pools):
            return
        for pool in sorted(pools):
            if self._stop.is_set():
                return
            self._reconcile_pool(pool)

    def _universe(self) -> set[str]:
        """Pools to keep in shape: valid desired pools and any pool we have slices of."""
        return (set(self.pools.desired) | set(self._cache.by_pool())) - set(self.pools.problems)

    def _all_clean(self) -> bool:
        return all(self._clean.get(p, False) for p in self._universe())

    def _apply_inventory(self, inventory: Inventory) -> set[str]:
        """Adopt a new inventory; returns the pools whose desired slices changed."""
        changed = self.pools.adopt(inventory, self.node_uid.uid)
        for name in changed:
            self._clean.pop(name, None)
            self.server_changes.forget(name)
        return changed

    def _plan(self, pool: str) -> PoolPlan:
        observed = self._cache.pool_slices(pool)
        desired = self.pools.desired.get(pool)
        if desired is None:
            return plan_removal(pool, observed)
        assert self.node_uid.uid is not None
        target = SliceTarget(self._driver, self._node, self.node_uid.uid)
        return plan_pool(desired, observed, target, self.server_changes.accepted(pool),
                         frozenset(self._writer.taken_names))

    def _reconcile_pool(self, pool: str) -> None:
        self._counters.count_reconcile()
        plan = self._plan(pool)
        creates = any(w.verb == "create" for w in plan.writes)
        if creates and self.node_uid.stale:
            if not self.node_uid.ensure({pool}, refresh=True):
                return
            plan = self._plan(pool)
        if plan.empty:
            if not self._clean.get(pool):
                self._share_devices(pool)
            self._clean[pool] = True
            self._attempts.pop(pool, None)
            self._verify_rounds.pop(pool, None)
            return
        self._clean[pool] = False
        _log_plan(plan)
        try:
            if not self._writer.execute(plan, self.pools.desired.get(pool), self._stop):
                return
        except ApiError as err:
            self._handle_error(pool, err)
            return
        self._verify(pool)

    def _share_devices(self, pool: str) -> None:
        """A pool just became clean: its stored devices equal the desired ones, so hold
        them once (`SliceCache.share_devices`)."""
        desired = self.pools.desired.get(pool)
        if desired is not None:
            self._cache.share_devices(pool, {str(d.get("name")): d for s in desired.slices
                                             for d in s.devices})

    def _verify(self, pool: str) -> None:
        """Check the result with a fresh plan right away (normally empty); a plan that
        keeps needing writes is slowed down instead of looping."""
        rounds = self._verify_rounds.get(pool, 0) + 1
        self._verify_rounds[pool] = rounds
        if rounds <= _MAX_VERIFY_ROUNDS:
            self._queue.signal({pool}, urgent=True)
        else:
            log.warning("pool %r still differs after %d rounds of writes; slowing down",
                        pool, rounds)
            self._queue.retry(pool, self._backoff.delay(rounds - _MAX_VERIFY_ROUNDS))

    def _handle_error(self, pool: str, err: ApiError) -> None:
        self._counters.count_error(err.kind)
        if err.kind == "invalid" and self._relayout():
            self._queue.retry(pool, 0.0)
            return
        attempts = self._attempts.get(pool, 0) + 1
        self._attempts[pool] = attempts
        if err.kind in QUICK_RETRY_KINDS:
            self._writer.reread(err)
            if attempts <= _MAX_QUICK_RETRIES:
                log.info("pool %r: %s; re-read, retrying now", pool, err)
                self._queue.retry(pool, 0.0)
                return
        delay = self._backoff.delay(attempts - 1, err.retry_after)
        hint = refusal_hint(err.message) if err.kind == "invalid" else ""
        log.warning("pool %r: %s%s; retrying in %.2fs", pool, err, hint, delay)
        self._queue.retry(pool, delay)


def _placement(layout: SliceLayout) -> str:
    return ("with the devices that consume them" if layout is SliceLayout.WITH_DEVICES
            else "in slices of their own")


def _log_plan(plan: PoolPlan) -> None:
    counts = {verb: sum(w.verb == verb for w in plan.writes)
              for verb in ("delete", "update", "create")}
    log.info("pool %r: publishing generation %d%s with %d slices: %d deletes, "
             "%d updates, %d creates", plan.pool, plan.generation,
             " (bumped)" if plan.bumped else "", plan.slice_count, counts["delete"],
             counts["update"], counts["create"])
