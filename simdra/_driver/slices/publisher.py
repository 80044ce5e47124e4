"""Publish the inventory as ResourceSlices and keep them published (side effects).

Two threads:
- the watcher (`watcher.SliceWatcher`) lists and watches our slices, feeding
  `SliceCache` and signalling pools whose slices changed;
- the worker (`reconciler.Reconciler`) waits for work (`workqueue.WorkQueue`: debounce,
  per-pool retry times), then plans each pool that needs it (`diff.plan_pool`, pure)
  and executes the plan (`writes.SliceWriter`): deletes, updates, creates.

Work comes from `update(inventory)`, from watch events on our slices (debounced, so
the kubelet deleting all slices at start costs one pass), and from retries. A quiet
node makes no API calls besides the idle watch, and no CPU.

Behaviour beyond the Go helper (api-facts 6.3), each described where it is done:
deleted slices come back after the debounce (`workqueue`); creates are idempotent
(`writes`); 409/429/5xx handling and per-pool backoff (`reconciler`); dropped fields
reported once and the stored form accepted (`server_changes`); the Node's UID re-read
before recreating slices (`node_uid`); invalid pools left as they are (`validated`).

Thread safety: one condition, created here, guards the work queue, the counters
(`stats.PublisherCounters`), the validation problems, the dropped-field reports and,
for `stats()`, the Node UID; the rest of the reconciler's state is the worker's own,
and the watcher's resourceVersion is the watcher's own. `SliceCache` has its own lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from simdra._driver.devices.model import Inventory
from simdra._driver.kubeapi import RestClient
from simdra._driver.slices.api import SliceApi
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.feed import SliceFeed
from simdra._driver.slices.observed import SliceCache
from simdra._driver.slices.reconciler import Reconciler
from simdra._driver.slices.stats import PublisherCounters, PublisherStats
from simdra._driver.slices.watcher import SliceWatcher
from simdra._driver.slices.workqueue import WorkQueue

JSON = dict[str, Any]


class Publisher:
    """Keeps this node's ResourceSlices equal to the inventory.

    `start()` launches the background threads; `update()` replaces the inventory;
    `wait_synced()` blocks until every valid pool is published; `stop()` ends it all.
    The publisher never raises for API trouble: it retries, logs and counts (`stats()`).
    """

    def __init__(
        self,
        api_client: RestClient,
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
        feed: SliceFeed | None = None,
        node_uid: str | None = None,
    ) -> None:
        """With `feed`, this node's slices come from that shared list and watch
        (`simdra._driver.slices.feed`) instead of a watch of its own: one thread, not two. With
        `node_uid` (the caller just created or listed the Node), the first writes own
        the slices by it without reading the Node, however late they come (`node_uid`
        module)."""
        backoff = backoff or Backoff()
        self._feed = feed
        self._api = SliceApi(api_client, driver, node)
        self._cache = SliceCache()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._queue = WorkQueue(self._cond, self._stop, inventory or Inventory(pools=()),
                                debounce, max_delay)
        self._counters = PublisherCounters(self._cond)
        self._watcher = SliceWatcher(self._api, self._cache, self._queue, self._counters,
                                     backoff, self._stop, watch_timeout)
        self._reconciler = Reconciler(
            self._api, self._cache, self._queue, self._counters, self._cond, self._stop,
            backoff=backoff, node_uid_max_age=node_uid_max_age,
            write_concurrency=write_concurrency, node_uid=node_uid,
            gate=None if feed is None else feed._passes,
        )

    def start(self) -> None:
        """Start listing/watching our slices and publishing; returns at once."""
        if self._threads:
            raise RuntimeError("publisher already started")
        parts = [(self._reconciler.run, "publish")]
        if self._feed is None:
            parts.insert(0, (self._watcher.run, "watch"))
        else:
            self._feed._register(self._api, self._cache, self._queue)
        for target, name in parts:
            thread = threading.Thread(target=target, name=f"slices-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def update(self, inventory: Inventory) -> None:
        """Publish `inventory` from now on (only pools whose slices change are written)."""
        self._queue.set_inventory(inventory)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every valid pool is published as desired; False on timeout."""
        return self._queue.wait_synced(timeout)

    def has_synced(self) -> bool:
        """True once every valid pool has been published as desired, at least once since
        start. Later changes do not reset it, so readiness does not flap on a rescan."""
        with self._cond:
            return self._queue.last_sync_time is not None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop both threads and close the watch. Published slices stay on the server."""
        self._stop.set()
        if self._feed is not None:
            self._feed._unregister(self._api.node)
        self._queue.wake()
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
        counters, reconciler = self._counters, self._reconciler
        with self._cond:
            return PublisherStats(
                writes=dict(counters.writes),
                errors=dict(counters.errors),
                synced=self._queue.synced,
                last_sync_time=self._queue.last_sync_time,
                generations=generations,
                slices={pool: len(objs) for pool, objs in by_pool.items()},
                dropped_fields=reconciler.server_changes.reports(),
                validation_problems={
                    p: tuple(map(str, v)) for p, v in reconciler.pools.problems.items()
                },
                node_uid=reconciler.node_uid.uid,
                relists=counters.relists,
                reconciles=counters.reconciles,
            )


def _generation(obj: JSON) -> int:
    value = ((obj.get("spec") or {}).get("pool") or {}).get("generation", 0)
    return value if isinstance(value, int) else 0
