"""Test hooks: injected failures and the log of requests the server answered."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from simdra._driver.testing.apiserver.errors import APIError, injected

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
VERBS = frozenset({"get", "list", "watch", *WRITE_VERBS})
INJECTABLE_CODES = frozenset({409, 410, 429, 500, 503, 504})


@dataclass(frozen=True)
class Request:
    """One answered request. `resource` carries the subresource: `resourceclaims/status`."""

    verb: str
    resource: str
    namespace: str
    name: str
    code: int

    @property
    def is_write(self) -> bool:
        """True for requests that would change state (whether or not they succeeded)."""
        return self.verb in WRITE_VERBS


@dataclass
class _Fault:
    verb: str
    resource: str
    code: int
    remaining: int
    retry_after: int | None


class Faults:
    """Failures queued by tests: the next N matching requests answer with an error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Fault] = []

    def inject(
        self, verb: str, resource: str, code: int, count: int = 1, retry_after: int | None = None
    ) -> None:
        """Fail the next `count` requests of `verb` on `resource` ("*" matches any)."""
        if verb != "*" and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; use one of {sorted(VERBS)} or '*'")
        if code not in INJECTABLE_CODES:
            raise ValueError(f"cannot inject HTTP {code}; use one of {sorted(INJECTABLE_CODES)}")
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        with self._lock:
            self._queue.append(_Fault(verb, resource, code, count, retry_after))

    def take(self, verb: str, resource: str) -> APIError | None:
        """The error for this request if a queued failure matches it (consuming one use)."""
        with self._lock:
            for fault in self._queue:
                if fault.verb in ("*", verb) and fault.resource in ("*", resource):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._queue.remove(fault)
                    return injected(fault.code, fault.retry_after)
        return None

    def pending(self) -> int:
        """How many injected failures have not fired yet."""
        with self._lock:
            return sum(f.remaining for f in self._queue)

    def clear(self) -> None:
        """Drop every queued failure."""
        with self._lock:
            self._queue.clear()


@dataclass
class Stall:
    """A slowed API server whose test can tell concurrent requests from sequential ones:
    each matching request waits up to `seconds`, and all waiting ones go on at once when
    `together` of them are in flight. `max_in_flight` is the most that were at once."""

    verb: str
    resource: str
    seconds: float
    together: int
    in_flight: int = 0
    max_in_flight: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def matches(self, verb: str, resource: str) -> bool:
        """True when this stall slows requests of `verb` on `resource`."""
        return self.verb in ("*", verb) and self.resource in ("*", resource)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Wait as the stall says, then serve the request (inside the block)."""
        with self._changed:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._changed.notify_all()
            deadline = time.monotonic() + self.seconds
            while self.max_in_flight < self.together and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
        try:
            yield
        finally:
            with self._changed:
                self.in_flight -= 1


class Stalls:
    """The stalls a test set up; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stalls: list[Stall] = []

    def add(self, stall: Stall) -> Stall:
        """Slow the requests `stall` matches from now on."""
        with self._lock:
            self._stalls.append(stall)
        return stall

    @contextlib.contextmanager
    def hold(self, verb: str, resource: str) -> Iterator[None]:
        """Serve a request inside the block, after the first matching stall's wait."""
        with self._lock:
            stall = next((s for s in self._stalls if s.matches(verb, resource)), None)
        if stall is None:
            yield
            return
        with stall.hold():
            yield


class RequestLog:
    """Every request the server answered, in order; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[Request] = []

    def record(self, request: Request) -> None:
        """Append one answered request."""
        with self._lock:
            self._entries.append(request)

    def entries(self, verb: str | None = None, resource: str | None = None) -> list[Request]:
        """The requests so far, optionally only those of `verb` and/or `resource`."""
        with self._lock:
            entries = list(self._entries)
        return [
            e
            for e in entries
            if (verb is None or e.verb == verb) and (resource is None or e.resource == resource)
        ]

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        """How many requests of `verb` on `resource` (None = any) were answered."""
        return len(self.entries(verb, resource))

    def counts(self) -> Counter[tuple[str, str]]:
        """Request counts by (verb, resource)."""
        return Counter((e.verb, e.resource) for e in self.entries())

    def writes(self, resource: str | None = None) -> int:
        """How many mutating requests (create/update/patch/delete/deletecollection) arrived."""
        return sum(1 for e in self.entries(resource=resource) if e.is_write)

    def clear(self) -> None:
        """Forget every request so far (e.g. after a test's setup phase)."""
        with self._lock:
            self._entries.clear()
