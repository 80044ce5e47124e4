"""The object store: current objects, one global resourceVersion, and the watch history.

Every committed write takes the next resourceVersion and appends one event to the history,
so event `rv` sits at index `rv - first` and a watch resumes from any resourceVersion
still in the history (older ones are "compacted", as etcd does, and answer 410).

Stored objects are never changed in place: a write replaces the top-level dict. Readers
may therefore serialize what they get without holding the lock, but must not mutate it.
"""

from __future__ import annotations

import builtins
import json
import threading
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)


class _Expect:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


ABSENT = _Expect("ABSENT")  # commit only if no object has this key (create)
ANY = _Expect("ANY")  # commit whatever is there (test hooks)


class StaleObject(Exception):
    """The object changed (or appeared/vanished) since the caller read it."""


class HistoryExpired(Exception):
    """A watch asked for events older than the history still holds."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass
class WatchEvent:
    """One committed change: `obj` is the new state (the last state for DELETED)."""

    rv: int
    resource: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: JSON
    prev: JSON | None  # the state before a MODIFIED, for selector transitions
    _lines: dict[str, bytes] = field(default_factory=dict, repr=False)

    def line(self, event_type: str | None = None) -> bytes:
        """The JSON line a watch sends, cached: every watcher shares the encoding."""
        kind = event_type or self.type
        cached = self._lines.get(kind)
        if cached is None:
            cached = (
                json.dumps({"type": kind, "object": self.obj}, separators=(",", ":")).encode()
                + b"\n"
            )
            self._lines[kind] = cached
        return cached


def object_rv(obj: JSON) -> int:
    """The resourceVersion of a stored object, as an integer."""
    return int(obj["metadata"]["resourceVersion"])


def key_of(obj: JSON) -> Key:
    """The store key of an object: (namespace or "", name)."""
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta["name"])


class Store:
    """Thread-safe objects by resource and key, with a bounded, resumable event history."""

    def __init__(self, history_limit: int = 100_000) -> None:
        self._cond = threading.Condition()
        self._objects: dict[str, dict[Key, JSON]] = {}
        self._rv = 1
        self._history: list[WatchEvent] = []
        self._first = 2  # resourceVersion of _history[0] (or the next one when empty)
        self._limit = max(1, history_limit)
        self._closed = False

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest write."""
        with self._cond:
            return self._rv

    @property
    def closed(self) -> bool:
        """True once the server is stopping: watches must end."""
        return self._closed

    def get(self, resource: str, key: Key) -> JSON | None:
        """The current object, or None."""
        with self._cond:
            return self._objects.get(resource, {}).get(key)

    def list(self, resource: str, namespace: str | None = None) -> tuple[list[JSON], int]:
        """All objects of `resource` (in `namespace` if given) sorted by key, and the RV."""
        with self._cond:
            table = self._objects.get(resource, {})
            keys = sorted(k for k in table if namespace is None or k[0] == namespace)
            return [table[k] for k in keys], self._rv

    def commit(self, resource: str, key: Key, new: JSON | None, expect: Any) -> JSON:
        """Write `new` (None deletes) if the current object is what the caller expects.

        `expect` is ABSENT (create), ANY, or the integer resourceVersion the caller read.
        Returns the stored object, or for a delete the last state with the delete's RV.
        """
        with self._cond:
            table = self._objects.setdefault(resource, {})
            current = table.get(key)
            self._check(current, expect)
            if new is None and current is None:
                raise StaleObject(f"{resource} {key} does not exist")
            self._rv += 1
            if new is None:
                assert current is not None
                stored = _with_rv(current, self._rv)
                del table[key]
                event = WatchEvent(self._rv, resource, "DELETED", stored, None)
            else:
                stored = _with_rv(new, self._rv)
                table[key] = stored
                kind = "ADDED" if current is None else "MODIFIED"
                event = WatchEvent(self._rv, resource, kind, stored, current)
            self._append(event)
            return stored

    @staticmethod
    def _check(current: JSON | None, expect: Any) -> None:
        if expect is ANY:
            return
        if expect is ABSENT:
            if current is not None:
                raise StaleObject("object exists")
            return
        if current is None or object_rv(current) != expect:
            raise StaleObject(f"expected resourceVersion {expect}")

    def _append(self, event: WatchEvent) -> None:
        self._history.append(event)
        if len(self._history) > self._limit:
            # Trim in chunks so appends stay amortized O(1).
            drop = max(1, self._limit // 10)
            del self._history[:drop]
            self._first += drop
        self._cond.notify_all()

    # builtins.list: in this class, `list` names the method above.
    def events_after(self, after: int, timeout: float) -> builtins.list[WatchEvent]:
        """Events with resourceVersion > `after`, waiting up to `timeout` s for the first.

        Returns [] on timeout or when the store closes; raises HistoryExpired when events
        after `after` have already been dropped from the history.
        """
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._rv > after, timeout)
            if self._closed:
                return []
            if after < self._first - 1:
                raise HistoryExpired(after, self._first - 1)
            return self._history[after + 1 - self._first :]

    def compact(self) -> int:
        """Forget the history, as etcd compaction does; returns the oldest valid watch RV."""
        with self._cond:
            self._history.clear()
            self._first = self._rv + 1
            return self._rv

    def wait_for_version(self, rv: int, timeout: float) -> bool:
        """Wait up to `timeout` s until resourceVersion `rv` exists; False if it does not."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._rv >= rv, timeout)
            return self._rv >= rv

    def close(self) -> None:
        """Wake every waiting watch so it can end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def reopen(self) -> None:
        """Serve watches again after `close` (a restarted server keeps its data, as etcd)."""
        with self._cond:
            self._closed = False


def _with_rv(obj: JSON, rv: int) -> JSON:
    return {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(rv)}}
