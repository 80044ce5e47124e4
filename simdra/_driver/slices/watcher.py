"""The publisher's watcher thread: list and watch our slices, feeding `SliceCache`.

It lists our slices (field selectors `spec.driver` and `spec.nodeName`), then watches
from the list's resourceVersion. It lists again after a 410 (at once) or any watch
error (with backoff, Retry-After respected), and resumes the watch when the server ends
it (a watch ended at once without events counts as an error, like client-go's reflector,
so it cannot spin). Each change to a pool's slices signals that pool in the work queue;
the first list is what lets the worker start.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from simdra._driver.slices.api import ApiError, SliceApi
from simdra._driver.slices.backoff import Backoff
from simdra._driver.slices.observed import SliceCache, pool_of
from simdra._driver.slices.stats import PublisherCounters
from simdra._driver.slices.workqueue import WorkQueue

# One logger for all of the publisher's lines, as before it was split by role.
log = logging.getLogger("simdra._driver.slices.publisher")

JSON = dict[str, Any]
_MIN_WATCH_SECONDS = 1.0  # a shorter watch without events counts as a failure


class SliceWatcher:
    """Keeps `cache` equal to our slices on the server and signals changed pools.

    `run()` is the thread's body; it returns once `stop` is set (the publisher also
    calls `SliceApi.stop_watch()` to end a watch in progress). The resourceVersion and
    the attempt count are this thread's own.
    """

    def __init__(
        self,
        api: SliceApi,
        cache: SliceCache,
        queue: WorkQueue,
        counters: PublisherCounters,
        backoff: Backoff,
        stop: threading.Event,
        watch_timeout: int,
    ) -> None:
        self._api, self._cache, self._queue = api, cache, queue
        self._counters, self._backoff, self._stop = counters, backoff, stop
        self._watch_timeout = watch_timeout
        self._resource_version: str | None = None
        self._attempts = 0  # failures since the last event, for the backoff

    def run(self) -> None:
        """List and watch until stopped, backing off after failures."""
        while not self._stop.is_set():
            problem = self._list_and_watch()
            if problem is None:
                continue
            self._resource_version = None
            delay = self._backoff.delay(self._attempts, getattr(problem, "retry_after", None))
            self._attempts += 1
            log.warning("slice watch failed: %s; listing again in %.2fs", problem, delay)
            self._stop.wait(delay)

    def _list_and_watch(self) -> object | None:
        """List when needed, then watch; the problem to back off from, or None (the watch
        ended normally, expired, or we are stopping)."""
        try:
            if self._resource_version is None:
                self._resource_version = self._relist()
            if self._follow(self._resource_version):
                return None
            # Ended at once without a single event (a server shutting down, a proxy):
            # back off instead of spinning.
            self._counters.count_error("watch_closed")
            return "the server ended the watch at once"
        except ApiError as err:
            if self._stop.is_set():
                return None
            if err.kind == "gone":
                log.info("slice watch expired (%s); listing again", err)
                self._resource_version = None
                return None
            self._counters.count_error(err.kind)
            return err
        except Exception as exc:  # a bug must not end the watch for good
            if self._stop.is_set():
                return None
            log.exception("slice watch crashed")
            self._counters.count_error("internal")
            return exc

    def _follow(self, resource_version: str) -> bool:
        """Apply one watch's events; False when it ended at once without any."""
        started, events = time.monotonic(), 0
        for event in self._api.watch_slices(resource_version, self._watch_timeout):
            if self._stop.is_set():
                return True
            self._resource_version = self._on_event(event) or self._resource_version
            self._attempts, events = 0, events + 1
        if self._stop.is_set():
            return True
        # The server ended the watch (its timeout): resume from where we are.
        return bool(events) or time.monotonic() - started >= _MIN_WATCH_SECONDS

    def _relist(self) -> str:
        since = self._cache.mark()
        items, resource_version = self._api.list_slices()
        changed = self._cache.replace(items, resource_version, since)
        self._counters.count_relist()
        self._queue.mark_listed(changed)
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
                self._queue.signal({pool})
        return str(resource_version) if resource_version else None
