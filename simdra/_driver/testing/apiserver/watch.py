"""Watch streams: the JSON lines a watch request receives, as a generator of bytes.

Semantics of the real server's watch cache: resourceVersion "" or "0" first sends the
current objects as ADDED; a numeric resourceVersion sends every change after it, or one
ERROR event with a 410 Expired Status when that history is gone, or with a 504 "Too large
resource version" Status when the server has not reached it after a short wait (as after a
client kept a version from another etcd). Field/label selectors
turn a MODIFIED that enters or leaves the selection into ADDED or DELETED. Bookmarks (if
asked for) carry the latest resourceVersion every `bookmark_interval` seconds and about
two seconds before the watch times out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from simdra._driver.testing.apiserver.errors import expired, too_large_resource_version
from simdra._driver.testing.apiserver.resources import ResourceType
from simdra._driver.testing.apiserver.selectors import Selector
from simdra._driver.testing.apiserver.store import HistoryExpired, Store, WatchEvent

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# A quiet watch whose client disconnected would otherwise hold its thread until timeout.
CLIENT_CHECK_INTERVAL = 1.0
# How long the watch cache waits for a resourceVersion it has not seen yet.
TOO_LARGE_WAIT = 3.0


@dataclass(frozen=True)
class WatchRequest:
    """What a watch asked for."""

    resource: ResourceType
    namespace: str | None
    selector: Selector
    start: int | None  # None: send the current state first
    timeout: float
    bookmarks: bool
    initial_events_end: bool  # sendInitialEvents=true: mark the end of the initial state


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _bookmark(resource: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return _line(
        "BOOKMARK", {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}
    )


def _visible_type(event: WatchEvent, request: WatchRequest) -> str | None:
    """The event type this watcher sees, or None when the change is outside its selection."""
    if event.resource != request.resource.plural:
        return None
    namespace = (event.obj.get("metadata") or {}).get("namespace")
    if request.namespace is not None and namespace != request.namespace:
        return None
    matches = request.selector.matches(event.obj)
    if event.type == "MODIFIED" and event.prev is not None:
        matched = request.selector.matches(event.prev)
        if matches and matched:
            return "MODIFIED"
        if matches:
            return "ADDED"
        return "DELETED" if matched else None
    return event.type if matches else None


def stream(
    store: Store,
    request: WatchRequest,
    bookmark_interval: float,
    client_gone: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    too_large_wait: float = TOO_LARGE_WAIT,
) -> Iterator[bytes]:
    """The lines of one watch until it times out, the server stops, history expires or
    the client goes away (checked at least every `CLIENT_CHECK_INTERVAL` seconds)."""
    deadline = clock() + request.timeout
    if request.start is not None and not store.wait_for_version(request.start, too_large_wait):
        if not store.closed:
            error = too_large_resource_version(request.start, store.resource_version)
            yield _line("ERROR", error.status())
        return
    position = yield from _initial_events(store, request)
    next_bookmark = _next_bookmark(clock(), deadline, bookmark_interval)
    while not store.closed and not client_gone():
        now = clock()
        if now >= deadline:
            return
        wait = min(deadline - now, CLIENT_CHECK_INTERVAL)
        if request.bookmarks:
            wait = min(wait, max(0.0, next_bookmark - now))
        try:
            position = yield from _events(store, request, position, wait)
        except HistoryExpired as gone:
            yield _line("ERROR", expired(str(gone)).status())
            return
        if request.bookmarks and clock() >= next_bookmark and not store.closed:
            yield _bookmark(request.resource, position)
            next_bookmark = _next_bookmark(clock(), deadline, bookmark_interval)


def _initial_events(store: Store, request: WatchRequest) -> Generator[bytes, None, int]:
    """Without a start version: every object as ADDED (then the initial-events bookmark
    when asked for); returns the resourceVersion to watch from."""
    if request.start is not None:
        return request.start
    items, position = store.list(request.resource.plural, request.namespace)
    for obj in items:
        if request.selector.matches(obj):
            yield _line("ADDED", obj)
    if request.initial_events_end and request.bookmarks:
        yield _bookmark(request.resource, position, initial_end=True)
    return position


def _events(store: Store, request: WatchRequest, position: int,
            wait: float) -> Generator[bytes, None, int]:
    """The lines of the events after `position` (waiting up to `wait` for one); returns
    the new position. Raises HistoryExpired when `position` is too old."""
    for event in store.events_after(position, wait):
        position = event.rv
        shown = _visible_type(event, request)
        if shown is not None:
            yield event.line(shown)
    return position


def _next_bookmark(now: float, deadline: float, interval: float) -> float:
    # The real watch cache bookmarks shortly before a watch's deadline, so a client
    # that reconnects resumes from a fresh resourceVersion instead of an old one.
    before_deadline = deadline - 2.0
    if now < before_deadline:
        return min(now + interval, before_deadline)
    return now + interval
