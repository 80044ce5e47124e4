"""Publish the inventory as ResourceSlices and keep them published (side effects).

Two threads:
- the watcher lists our slices (field selectors `spec.driver` and `spec.nodeName`), then
  watches from the list's resourceVersion, feeding `SliceCache`; it lists again after a
  410 or any watch error (with backoff), and resumes the watch when the server ends it
  (a watch ended at once without events counts as an error, so it cannot spin);
- the worker waits for work, then plans each pool that needs it (`diff.plan_pool`, pure)
  and executes the plan: deletes, updates, creates.

Work comes from `update(inventory)`, from watch events on our slices (debounced, so
the kubelet deleting all slices at start costs one pass), and from retries. A quiet
node makes no API calls besides the idle watch, and no CPU.

Behaviour beyond the Go helper (api-facts 6.3):
- deleted slices come back after the debounce (0.1 s), not after 30 s;
- deterministic slice names (see `naming`) make creates idempotent, so a lost create
  response cannot publish devices twice;
- 409 re-reads the slice and retries at once; 429/5xx/connection errors back off
  exponentially with jitter (capped at 30 s, Retry-After respected) per pool, so one
  pool's trouble does not delay another;
- fields the server drops are reported once, with the likely feature gates, and the
  stored form is accepted so that no write loop follows;
- the Node's UID is re-read before recreating slices when it is more than 10 s old, so
  a re-created Node (new UID) does not make the garbage collector delete every slice we
  publish.

Invalid pools (local validation, `checks`) are reported and left as they are on the
server: their last valid slices stay published until the inventory is fixed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient

from driver.devices.model import Inventory
from driver.slices import naming
from driver.slices.api import ApiError, SliceApi
from driver.slices.backoff import Backoff
from driver.slices.checks import PoolProblem, pool_problems
from driver.slices.desired import DesiredPool, DesiredSlice, desired_pools
from driver.slices.diff import (
    AcceptedForm,
    PoolPlan,
    SliceTarget,
    SliceWrite,
    content_differences,
    normalized_content,
    plan_pool,
    plan_removal,
    slice_object,
)
from driver.slices.dropped import DroppedFields, find_dropped, likely_gates
from driver.slices.observed import SliceCache, pool_of
from driver.slices.stats import PublisherStats
from driver.slices.validation import FieldError, validate_slice

log = logging.getLogger(__name__)

JSON = dict[str, Any]
_QUICK_RETRY_KINDS = frozenset({"conflict", "already_exists", "not_found"})
_MAX_QUICK_RETRIES = 3
_MAX_VERIFY_ROUNDS = 3
_LOGGED_PROBLEMS = 20
_MIN_WATCH_SECONDS = 1.0  # a shorter watch without events counts as a failure


@dataclass
class _Work:
    """Work taken by the worker in one pass."""

    pools: set[str] = field(default_factory=set)
    all_pools: bool = False
    inventory: Inventory | None = None


class Publisher:
    """Keeps this node's ResourceSlices equal to the inventory.

    `start()` launches the background threads; `update()` replaces the inventory;
    `wait_synced()` blocks until every valid pool is published; `stop()` ends it all.
    The publisher never raises for API trouble: it retries, logs and counts (`stats()`).
    """

    def __init__(
        self,
        api_client: ApiClient,
        driver: str,
        node: str,
        inventory: Inventory | None = None,
        *,
        debounce: float = 0.1,
        max_delay: float = 1.0,
        backoff: Backoff | None = None,
        watch_timeout: int = 300,
        node_uid_max_age: float = 10.0,
        write_concurrency: int = 4,
    ) -> None:
        self._api = SliceApi(api_client, driver, node)
        self._driver, self._node = driver, node
        self._debounce, self._max_delay = debounce, max_delay
        self._backoff = backoff or Backoff()
        self._watch_timeout = watch_timeout
        self._node_uid_max_age = node_uid_max_age
        self._write_concurrency = max(1, write_concurrency)
        self._cache = SliceCache()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        # Guarded by _cond: what is pending.
        self._inventory_pending: Inventory | None = inventory or Inventory(pools=())
        self._dirty: set[str] = set()
        self._dirty_all = False
        self._first_signal: float | None = None
        self._last_signal = 0.0
        self._urgent = False
        self._retry_at: dict[str, float] = {}
        self._node_wait_until = 0.0
        self._listed = False
        self._synced = False
        self._last_sync_time: float | None = None
        self._writes = {"create": 0, "update": 0, "delete": 0}
        self._errors: dict[str, int] = {}
        self._relists = 0
        self._reconciles = 0
        # Worker-only state.
        self._desired: dict[str, DesiredPool] = {}
        self._problems: dict[str, list[PoolProblem]] = {}
        self._clean: dict[str, bool] = {}
        self._attempts: dict[str, int] = {}
        self._verify_rounds: dict[str, int] = {}
        self._accepted: dict[tuple[str, int], AcceptedForm] = {}
        self._taken_names: set[str] = set()
        self._checked: dict[str, list[tuple[DesiredSlice, list[FieldError]]]] = {}
        self._dropped: dict[tuple[str, tuple[str, ...]], DroppedFields] = {}
        self._node_uid: str | None = None
        self._node_uid_at = 0.0
        self._node_attempts = 0

    # --- public API ---------------------------------------------------------------

    def start(self) -> None:
        """Start listing/watching our slices and publishing; returns at once."""
        if self._threads:
            raise RuntimeError("publisher already started")
        for target, name in ((self._watch_loop, "watch"), (self._work_loop, "publish")):
            thread = threading.Thread(target=target, name=f"slices-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def update(self, inventory: Inventory) -> None:
        """Publish `inventory` from now on (only pools whose slices change are written)."""
        with self._cond:
            self._inventory_pending = inventory
            self._signal_locked(())

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every valid pool is published as desired; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._synced, timeout)

    def has_synced(self) -> bool:
        """True once every valid pool has been published as desired, at least once since
        start. Later changes do not reset it, so readiness does not flap on a rescan."""
        with self._cond:
            return self._last_sync_time is not None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both threads and close the watch. Published slices stay on the server."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            while thread.is_alive() and time.monotonic() < deadline:
                self._api.stop_watch()  # repeated: the watch may just be starting
                thread.join(0.05)
        self._threads = []

    def __enter__(self) -> Publisher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> PublisherStats:
        """A snapshot of counters and state."""
        by_pool = self._cache.by_pool()
        generations = {
            pool: max((_generation(o) for o in objs), default=0)
            for pool, objs in by_pool.items()
        }
        with self._cond:
            return PublisherStats(
                writes=dict(self._writes),
                errors=dict(self._errors),
                synced=self._synced,
                last_sync_time=self._last_sync_time,
                generations=generations,
                slices={pool: len(objs) for pool, objs in by_pool.items()},
                dropped_fields=tuple(self._dropped.values()),
                validation_problems={p: tuple(map(str, v)) for p, v in self._problems.items()},
                node_uid=self._node_uid,
                relists=self._relists,
                reconciles=self._reconciles,
            )

    # --- scheduling ---------------------------------------------------------------

    def _signal_locked(self, pools: Iterable[str] | None = None, urgent: bool = False) -> None:
        """Record work (caller holds _cond); `pools` None means every pool."""
        if pools is None:
            self._dirty_all = True
        else:
            self._dirty |= set(pools)
        now = time.monotonic()
        if self._first_signal is None:
            self._first_signal = now
        self._last_signal = now
        self._urgent = self._urgent or urgent
        self._synced = False
        self._cond.notify_all()

    def _signal(self, pools: Iterable[str] | None = None, urgent: bool = False) -> None:
        with self._cond:
            self._signal_locked(pools, urgent)

    def _ready_at(self, now: float) -> float | None:
        """When the worker should run next (None: only when signalled)."""
        if not self._listed:
            return None
        when: float | None = None
        if self._dirty or self._dirty_all or self._inventory_pending is not None:
            first = now if self._first_signal is None else self._first_signal
            when = now if self._urgent else min(self._last_signal + self._debounce,
                                                 first + self._max_delay)
        if self._retry_at:
            first_retry = min(self._retry_at.values())
            when = first_retry if when is None else min(when, first_retry)
        if when is not None:
            when = max(when, self._node_wait_until)
        return when

    def _take_work(self) -> _Work | None:
        """Block until there is work; None once stopping."""
        with self._cond:
            while not self._stop.is_set():
                now = time.monotonic()
                ready = self._ready_at(now)
                if ready is not None and ready <= now:
                    due = {p for p, t in self._retry_at.items() if t <= now}
                    for pool in due:
                        del self._retry_at[pool]
                    work = _Work(self._dirty | due, self._dirty_all, self._inventory_pending)
                    self._dirty, self._dirty_all = set(), False
                    self._inventory_pending = None
                    self._first_signal, self._urgent = None, False
                    return work
                self._cond.wait(None if ready is None else ready - now)
        return None

    def _finish_pass(self) -> None:
        """Mark synced when nothing is pending and every valid pool's last plan was empty."""
        with self._cond:
            idle = not (self._dirty or self._dirty_all or self._retry_at
                        or self._inventory_pending is not None)
            synced = idle and all(self._clean.get(p, False) for p in self._universe())
            if synced and not self._synced:
                self._last_sync_time = time.time()
            self._synced = synced
            self._cond.notify_all()

    # --- worker -------------------------------------------------------------------

    def _work_loop(self) -> None:
        while (work := self._take_work()) is not None:
            try:
                self._run_pass(work)
            except Exception:  # never let a bug end publishing for good
                log.exception("slice publishing pass failed; retrying all pools")
                self._count_error("internal")
                with self._cond:
                    for pool in self._universe():
                        self._retry_at[pool] = time.monotonic() + self._backoff.cap
            self._finish_pass()

    def _run_pass(self, work: _Work) -> None:
        pools = set(work.pools)
        if work.inventory is not None:
            pools |= self._apply_inventory(work.inventory)
        if work.all_pools:
            pools |= self._universe()
        pools -= set(self._problems)  # invalid pools: reported, left as they are
        now = time.monotonic()
        with self._cond:
            pools = {p for p in pools if self._retry_at.get(p, 0.0) <= now}
        if not pools:
            return
        if not self._ensure_node_uid(pools):
            return
        for pool in sorted(pools):
            if self._stop.is_set():
                return
            self._reconcile_pool(pool)

    def _universe(self) -> set[str]:
        """Pools to keep in shape: valid desired pools and any pool we have slices of."""
        return (set(self._desired) | set(self._cache.by_pool())) - set(self._problems)

    def _apply_inventory(self, inventory: Inventory) -> set[str]:
        """Adopt a new inventory; returns the pools whose desired slices changed."""
        new = desired_pools(inventory)
        changed = {name for name, pool in new.items() if self._desired.get(name) != pool}
        changed |= set(self._desired) - set(new)
        for name in changed:
            self._clean.pop(name, None)
            self._accepted = {k: v for k, v in self._accepted.items() if k[0] != name}
            if name in new:
                self._validate(new[name])
            else:
                self._checked.pop(name, None)
                with self._cond:
                    self._problems.pop(name, None)
        self._desired = new
        return changed

    def _validate(self, pool: DesiredPool) -> None:
        problems = pool_problems(pool, self._slice_errors(pool))
        with self._cond:
            before = self._problems.pop(pool.name, [])
            if problems:
                self._problems[pool.name] = problems
        if problems and problems != before:
            log.error("pool %r is invalid and will not be published (%d problems)",
                      pool.name, len(problems))
            for problem in problems[:_LOGGED_PROBLEMS]:
                log.error("  %s", problem)
        elif before and not problems:
            log.info("pool %r is valid again", pool.name)

    def _slice_errors(self, pool: DesiredPool) -> list[list[FieldError]]:
        """`validate_slice` errors per slice, reusing those of slices that did not change
        (validating 10,000 devices takes seconds; one changed device should not)."""
        count = len(pool.slices)
        width = naming.index_width(count)
        target = SliceTarget(self._driver, self._node, self._node_uid or "")
        previous = self._checked.get(pool.name, [])
        checked = []
        for i, desired in enumerate(pool.slices):
            if i < len(previous) and previous[i][0] == desired:
                errors = previous[i][1]
            else:
                name = naming.slice_name(i, width, self._driver, self._node, pool.name)
                errors = validate_slice(slice_object(desired, pool.name, 0, count, target, name))
            checked.append((desired, errors))
        self._checked[pool.name] = checked
        return [errors for _, errors in checked]

    def _ensure_node_uid(self, pools: set[str], refresh: bool = False) -> bool:
        """Know the Node's UID (owner reference); on failure retry the pools later."""
        if self._node_uid is not None and not refresh:
            return True
        try:
            uid = self._api.node_uid()
        except ApiError as err:
            self._count_error("node_missing" if err.kind == "not_found" else err.kind)
            delay = self._backoff.delay(self._node_attempts, err.retry_after)
            self._node_attempts += 1
            log.warning("cannot publish slices yet: %s; retrying in %.1fs", err, delay)
            with self._cond:
                self._node_wait_until = time.monotonic() + delay
                self._dirty |= pools
                self._first_signal = self._first_signal or time.monotonic()
            return False
        if self._node_uid not in (None, uid):
            log.warning("Node %s has a new UID %s (was %s); re-owning slices",
                        self._node, uid, self._node_uid)
            self._signal()
        self._node_uid, self._node_uid_at, self._node_attempts = uid, time.monotonic(), 0
        return True

    def _plan(self, pool: str) -> PoolPlan:
        observed = self._cache.pool_slices(pool)
        desired = self._desired.get(pool)
        if desired is None:
            return plan_removal(pool, observed)
        assert self._node_uid is not None
        target = SliceTarget(self._driver, self._node, self._node_uid)
        accepted = {i: a for (p, i), a in self._accepted.items() if p == pool}
        return plan_pool(desired, observed, target, accepted, frozenset(self._taken_names))

    def _reconcile_pool(self, pool: str) -> None:
        with self._cond:
            self._reconciles += 1
        plan = self._plan(pool)
        creates = any(w.verb == "create" for w in plan.writes)
        if creates and time.monotonic() - self._node_uid_at > self._node_uid_max_age:
            if not self._ensure_node_uid({pool}, refresh=True):
                return
            plan = self._plan(pool)
        if plan.empty:
            self._clean[pool] = True
            self._attempts.pop(pool, None)
            self._verify_rounds.pop(pool, None)
            return
        self._clean[pool] = False
        self._log_plan(plan)
        try:
            for phase in _phases(plan.writes):
                if self._stop.is_set():
                    return
                self._execute_phase(phase)
        except ApiError as err:
            self._handle_error(pool, err)
            return
        # Check the result with a fresh plan right away (normally empty); a plan that
        # keeps needing writes is slowed down instead of looping.
        rounds = self._verify_rounds.get(pool, 0) + 1
        self._verify_rounds[pool] = rounds
        if rounds <= _MAX_VERIFY_ROUNDS:
            self._signal({pool}, urgent=True)
        else:
            log.warning("pool %r still differs after %d rounds of writes; slowing down",
                        pool, rounds)
            self._schedule_retry(pool, self._backoff.delay(rounds - _MAX_VERIFY_ROUNDS))

    def _log_plan(self, plan: PoolPlan) -> None:
        counts = {verb: sum(w.verb == verb for w in plan.writes)
                  for verb in ("delete", "update", "create")}
        log.info("pool %r: publishing generation %d%s with %d slices: %d deletes, "
                 "%d updates, %d creates", plan.pool, plan.generation,
                 " (bumped)" if plan.bumped else "", plan.slice_count, counts["delete"],
                 counts["update"], counts["create"])

    def _execute_phase(self, writes: list[SliceWrite]) -> None:
        """Send one phase's writes (all deletes, all updates or all creates), several at
        a time: their order within a phase does not matter to consumers, and a kubelet
        wiping the node's slices then costs round trips in parallel, not in sequence.
        Bookkeeping stays on this thread; errors are raised after the whole phase."""
        if len(writes) == 1 or self._write_concurrency == 1:
            for write in writes:
                self._record(write, self._send(write))
            return
        errors: list[ApiError] = []
        with ThreadPoolExecutor(min(self._write_concurrency, len(writes)),
                                thread_name_prefix="slice-write") as sender:
            futures = [(write, sender.submit(self._send, write)) for write in writes]
            for write, future in futures:
                try:
                    self._record(write, future.result())
                except ApiError as err:
                    errors.append(err)
        if errors:
            raise self._worst_of(errors)

    def _worst_of(self, errors: list[ApiError]) -> ApiError:
        """Count every failed write of a phase; the one to handle is the one asking for
        the longest wait (a 429 with Retry-After), else the first."""
        worst = max(errors, key=lambda err: err.retry_after or 0.0)
        for err in errors:
            if err is not worst:
                self._count_error(err.kind)
                if err.kind in _QUICK_RETRY_KINDS:
                    self._reread(err)
        return worst

    def _send(self, write: SliceWrite) -> JSON | None:
        """The API call of one write: the stored object, or None for a delete."""
        log.debug("%s slice %r of pool %r (%s)", write.verb, write.name, write.pool,
                  write.reason)
        if write.verb == "delete":
            try:
                self._api.delete(write.name, write.uid, write.resource_version)
            except ApiError as err:
                if err.kind != "not_found":
                    raise
            return None
        assert write.body is not None and write.index is not None
        if write.verb == "update":
            return self._api.replace(write.body)
        return self._api.create(write.body)

    def _record(self, write: SliceWrite, stored: JSON | None) -> None:
        """Count a sent write and keep the observed cache and checks current."""
        if write.verb == "delete":
            self._count_write("delete")
            self._cache.remove(write.name, write.uid)
            return
        assert stored is not None
        self._count_write(write.verb)
        self._cache.put(stored)
        self._check_stored(write, stored)

    def _check_stored(self, write: SliceWrite, stored: JSON) -> None:
        """Compare what the server stored with what we sent; report dropped fields once."""
        assert write.body is not None and write.index is not None
        stored_spec = stored.get("spec") or {}
        desired = self._desired[write.pool].slices[write.index]
        if not content_differences(stored_spec, desired):
            return
        # Whatever the server changed, compare against what it keeps from now on, so
        # that the next plan does not write the same thing again.
        self._accepted[(write.pool, write.index)] = AcceptedForm(
            sent=desired.spec_content(), stored=normalized_content(stored_spec)
        )
        paths = [p for p in find_dropped(write.body["spec"], stored_spec)
                 if not p.startswith("spec.pool")]
        key = (write.pool, tuple(paths))
        if not paths or key in self._dropped:
            log.debug("slice %r of pool %r stored with server-side changes; adopted",
                      stored["metadata"]["name"], write.pool)
            return
        report = DroppedFields(write.pool, str(stored["metadata"]["name"]), tuple(paths),
                               likely_gates(paths))
        log.warning("%s", report)
        with self._cond:
            self._dropped[key] = report

    def _handle_error(self, pool: str, err: ApiError) -> None:
        self._count_error(err.kind)
        attempts = self._attempts.get(pool, 0) + 1
        self._attempts[pool] = attempts
        if err.kind in _QUICK_RETRY_KINDS:
            self._reread(err)
            if attempts <= _MAX_QUICK_RETRIES:
                log.info("pool %r: %s; re-read, retrying now", pool, err)
                self._schedule_retry(pool, 0.0)
                return
        delay = self._backoff.delay(attempts - 1, err.retry_after)
        log.warning("pool %r: %s; retrying in %.2fs", pool, err, delay)
        self._schedule_retry(pool, delay)

    def _reread(self, err: ApiError) -> None:
        """After a conflict, refresh the slice named in the failed action from the server."""
        name = err.action.rsplit(" ", 1)[-1]
        try:
            current = self._api.get_slice(name)
        except ApiError as again:
            log.info("re-reading slice %r failed: %s", name, again)
            return
        if current is None:
            self._cache.remove(name, None)
            return
        ours = (current["spec"].get("driver") == self._driver
                and current["spec"].get("nodeName") == self._node)
        if ours and not current["metadata"].get("deletionTimestamp"):
            self._cache.put(current)
        else:
            self._taken_names.add(name)  # create the slice under a generated name instead

    def _schedule_retry(self, pool: str, delay: float) -> None:
        with self._cond:
            self._retry_at[pool] = time.monotonic() + delay
            self._cond.notify_all()

    def _count_write(self, verb: str) -> None:
        with self._cond:
            self._writes[verb] += 1

    def _count_error(self, kind: str) -> None:
        with self._cond:
            self._errors[kind] = self._errors.get(kind, 0) + 1

    # --- watcher ------------------------------------------------------------------

    def _watch_loop(self) -> None:
        attempts = 0
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                started, events = time.monotonic(), 0
                for event in self._api.watch_slices(resource_version, self._watch_timeout):
                    if self._stop.is_set():
                        return
                    resource_version = self._on_event(event) or resource_version
                    attempts, events = 0, events + 1
                if self._stop.is_set():
                    return
                if events or time.monotonic() - started >= _MIN_WATCH_SECONDS:
                    continue  # the server ended the watch (timeout): resume from where we are
                # Ended at once without a single event (a server shutting down, a proxy):
                # back off like client-go's reflector instead of spinning.
                self._count_error("watch_closed")
                problem: object = "the server ended the watch at once"
            except ApiError as err:
                if self._stop.is_set():
                    return
                if err.kind == "gone":
                    log.info("slice watch expired (%s); listing again", err)
                    resource_version = None
                    continue
                self._count_error(err.kind)
                problem = err
            except Exception as exc:  # a bug must not end the watch for good
                if self._stop.is_set():
                    return
                log.exception("slice watch crashed")
                self._count_error("internal")
                problem = exc
            resource_version = None
            delay = self._backoff.delay(attempts, getattr(problem, "retry_after", None))
            attempts += 1
            log.warning("slice watch failed: %s; listing again in %.2fs", problem, delay)
            self._stop.wait(delay)

    def _relist(self) -> str:
        since = self._cache.mark()
        items, resource_version = self._api.list_slices()
        changed = self._cache.replace(items, resource_version, since)
        with self._cond:
            self._relists += 1
            first = not self._listed
            self._listed = True
            if first:
                self._signal_locked()
            elif changed:
                self._signal_locked(changed)
        log.debug("listed %d slices at resourceVersion %s", len(items), resource_version)
        return resource_version

    def _on_event(self, event: JSON) -> str | None:
        obj = event.get("object") or {}
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            pool = self._cache.apply_event(str(kind), obj)
            if pool is not None:
                log.debug("slice %s %s (pool %r)", obj["metadata"].get("name"), kind.lower(),
                          pool_of(obj))
                self._signal({pool})
        return str(resource_version) if resource_version else None


def _phases(writes: Iterable[SliceWrite]) -> list[list[SliceWrite]]:
    """Consecutive writes of the same verb, in plan order (deletes, updates, creates)."""
    phases: list[list[SliceWrite]] = []
    for write in writes:
        if phases and phases[-1][0].verb == write.verb:
            phases[-1].append(write)
        else:
            phases.append([write])
    return phases


def _generation(obj: JSON) -> int:
    value = ((obj.get("spec") or {}).get("pool") or {}).get("generation", 0)
    return value if isinstance(value, int) else 0
