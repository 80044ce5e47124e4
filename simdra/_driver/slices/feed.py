"""One list and one watch of a driver's slices for many publishers (side effects).

A process that publishes for many nodes (`simdra fleet`) would otherwise hold a watch
and a watcher thread per node: a thousand connections to the API server, a thousand
lists at start. A `SliceFeed` lists and watches `spec.driver=<driver>` once and hands
each slice to the publisher of its `spec.nodeName` (`Publisher(..., feed=feed)`), whose
cache and work queue then behave exactly as with a watch of their own: the same
adoption, conflict handling and debounce, the same slices written.

The publishers of a feed take turns: at most CONCURRENT_PASSES of them run a pass at
once (the others wait, asleep).

Registration before `start()` is free: the first list covers every registered node. A
node registered later (a node joining) is listed on its own once, by a short-lived
thread that backs off while the API server is unavailable. Slices of nodes nobody
registered are not kept.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

from simdra._driver.kubeapi import RestClient
from simdra._driver.slices.api import ApiError, SliceApi
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.observed import SliceCache
from simdra._driver.slices.stats import PublisherCounters
from simdra._driver.slices.watcher import SliceWatcher
from simdra._driver.slices.workqueue import WorkQueue

log = logging.getLogger("simdra._driver.slices.publisher")
JSON = dict[str, Any]
VERSION_MAX_AGE_S = 60.0
# Publisher passes run at once, of all the publishers of a feed. A thousand publishers
# listed at once would otherwise all wake together to plan and validate: a thousand
# threads fighting over the GIL spend more CPU handing it over (in the kernel) than
# working. 32, a fleet client's connections, keep the API server busy; with 8 a fleet's
# writes queued behind the cluster's own work on its new Nodes.
CONCURRENT_PASSES = 32


class SliceFeed:
    """Lists and watches one driver's slices on every node for many publishers.

    `start()` starts its one thread; `stop()` ends it. Publishers register themselves
    when they start and leave when they stop (the rest is private to the publisher).
    """

    def __init__(self, api_client: RestClient, driver: str, *, backoff: Backoff | None = None,
                 watch_timeout: int = 300) -> None:
        self.driver = driver
        self._backoff = backoff or Backoff()
        self._api = SliceApi(api_client, driver, "")
        self._api.field_selector = f"spec.driver={driver}"  # every node's
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[SliceCache, WorkQueue]] = {}  # guarded by _lock
        self._has_listed = False  # guarded by _lock
        self._stop = threading.Event()
        self.counters = PublisherCounters(threading.Condition())
        self._watcher = _FeedWatcher(self, self._api, self.counters, self._backoff, self._stop,
                                     watch_timeout)
        self._thread: threading.Thread | None = None
        # Taken by each registered publisher's passes (`Reconciler(gate=...)`).
        self._passes = threading.BoundedSemaphore(CONCURRENT_PASSES)
        self._version_lock = threading.Lock()
        self._version: tuple[float, str] | None = None  # (read at, gitVersion)

    def start(self) -> None:
        """List and watch from now on; returns at once."""
        self._thread = threading.Thread(target=self._watcher.run, name="slices-feed",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the watch and the thread."""
        self._stop.set()
        thread = self._thread
        while thread is not None and thread.is_alive() and timeout > 0:
            self._api.stop_watch()
            thread.join(0.05)
            timeout -= 0.05

    def _register(self, api: SliceApi, cache: SliceCache, queue: WorkQueue) -> None:
        """Feed `api.node`'s slices into `cache` and `queue` from now on (and the
        server's release, read once for all)."""
        api.version_source = self._server_version
        with self._lock:
            self._nodes[api.node] = (cache, queue)
            late = self._has_listed
        if late:
            threading.Thread(target=self._list_one, args=(api, cache, queue),
                             name="slices-feed-join", daemon=True).start()

    def _unregister(self, node: str) -> None:
        """Stop feeding `node`."""
        with self._lock:
            self._nodes.pop(node, None)

    def _server_version(self) -> str:
        """/version's gitVersion, read at most once a minute for every publisher (a
        publisher re-reads it at most once a minute anyway, after invalid writes)."""
        with self._version_lock:
            now = time.monotonic()
            if self._version is None or now - self._version[0] > VERSION_MAX_AGE_S:
                self._version = (now, self._api.server_version())
            return self._version[1]

    # -- the watcher's side ---------------------------------------------------------------

    def _marks(self) -> dict[str, int]:
        """Each registered cache's write mark, taken before a list."""
        with self._lock:
            return {node: cache.mark() for node, (cache, _queue) in self._nodes.items()}

    def _listed(self, items: list[JSON], resource_version: str, marks: dict[str, int]) -> None:
        """A full list: each registered node's part goes to its cache and queue."""
        by_node: dict[str, list[JSON]] = {}
        for item in items:
            by_node.setdefault(str((item.get("spec") or {}).get("nodeName")), []).append(item)
        with self._lock:
            nodes = dict(self._nodes)
            self._has_listed = True
        for node, (cache, queue) in nodes.items():
            changed = cache.replace(by_node.get(node, []), resource_version, marks.get(node, 0))
            queue.mark_listed(changed)

    def _event(self, kind: str, obj: JSON) -> None:
        """A watch event, for the publisher of its node (if any)."""
        node = str((obj.get("spec") or {}).get("nodeName"))
        with self._lock:
            target = self._nodes.get(node)
        if target is not None:
            pool = target[0].apply_event(kind, obj)
            if pool is not None:
                target[1].signal({pool})

    def _list_one(self, api: SliceApi, cache: SliceCache, queue: WorkQueue) -> None:
        """List a late-registered node's slices, retrying until it works or stops."""
        attempt = 0
        while not self._stop.is_set():
            since = cache.mark()
            try:
                items, resource_version = api.list_slices()
            except ApiError as err:
                delay = self._backoff.delay(attempt, err.retry_after)
                attempt += 1
                log.warning("listing the slices of %s failed: %s; again in %.2fs", api.node,
                            err, delay)
                self._stop.wait(delay)
                continue
            queue.mark_listed(cache.replace(items, resource_version, since))
            return


class _FeedWatcher(SliceWatcher):
    """The publisher's watcher (its list, watch, backoff and resume logic), listing and
    watching every node's slices and handing them to the feed."""

    def __init__(self, feed: SliceFeed, api: SliceApi, counters: PublisherCounters,
                 backoff: Backoff, stop: threading.Event, watch_timeout: int) -> None:
        # The cache and queue arguments are never used: `_relist` and `_on_event` below
        # are the only users, and they go through the feed.
        super().__init__(api, SliceCache(), cast(WorkQueue, None), counters, backoff, stop,
                         watch_timeout)
        self._feed = feed

    def _relist(self) -> str:
        marks = self._feed._marks()
        items, resource_version = self._api.list_slices()
        self._feed._listed(items, resource_version, marks)
        self._counters.count_relist()
        return resource_version

    def _on_event(self, event: JSON) -> str | None:
        obj = event.get("object") or {}
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._feed._event(str(kind), obj)
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        return str(resource_version) if resource_version else None


