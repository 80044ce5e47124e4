"""List and watch one collection, for as long as the fleet runs (side effects).

Lists, hands the items to `on_list`, then watches from the list's resourceVersion,
handing each event to `on_event`; after a 410 it lists again at once, after any other
failure with backoff (Retry-After honoured). Bookmarks only move the resourceVersion.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from simdra._driver.fleet import retry
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.slices.backoff import Backoff

log = logging.getLogger("simdra._driver.fleet")
JSON = dict[str, Any]


class ListWatch:
    """A thread keeping a consumer in step with one collection."""

    def __init__(self, client: RestClient, path: str, stop: threading.Event, *,
                 on_list: Callable[[list[JSON]], None], on_event: Callable[[str, JSON], None],
                 backoff: Backoff, timeout_seconds: int = 300, name: str = "fleet-watch"
                 ) -> None:
        self._client, self._path, self._stop = client, path, stop
        self._on_list, self._on_event = on_list, on_event
        self._backoff, self._timeout = backoff, timeout_seconds
        self._watch: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start listing and watching."""
        self._thread.start()

    def stop(self) -> None:
        """End the watch in progress and wait for the thread (the stop event is set)."""
        while self._thread.is_alive():
            watch = self._watch
            if watch is not None:
                watch.close()
            self._thread.join(0.05)

    def _run(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                version = self._list()
                while not self._stop.is_set():
                    version = self._follow(version)
                    attempt = 0
            except _Expired:
                continue
            except Exception as exc:
                if self._stop.is_set():
                    return
                if not retry.transient(exc) and not isinstance(exc, ApiStatusError):
                    log.exception("fleet: watch of %s failed", self._path)
                delay = self._backoff.delay(attempt, getattr(exc, "retry_after", None))
                attempt += 1
                log.warning("fleet: watch of %s: %s; listing again in %.2fs", self._path,
                            " ".join(str(exc).split())[:200], delay)
                self._stop.wait(delay)

    def _list(self) -> str:
        answer = self._client.request("GET", self._path)
        self._on_list(list(answer.get("items") or []))
        return str(answer["metadata"].get("resourceVersion", ""))

    def _follow(self, version: str) -> str:
        query: dict[str, str | int | bool] = {
            "resourceVersion": version, "allowWatchBookmarks": True,
            "timeoutSeconds": self._timeout}
        self._watch = self._client.watch(self._path, query, (10.0, self._timeout + 30.0))
        events = 0
        try:
            for event in self._watch:
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise _Expired()
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._on_event(str(kind), obj)
                events += 1
        finally:
            self._watch = None
        if not events and not self._stop.is_set():
            self._stop.wait(1.0)  # ended at once: do not spin
        return version


class _Expired(Exception):
    """The watch's resourceVersion is too old: list again."""
