"""API calls that wait out an unavailable or throttling API server (side effects).

The publisher backs off on its own; the fleet's other writes (Nodes, claim status) go
through `call`: a 429 or 5xx answer or a connection error is retried after a capped,
jittered backoff that honours Retry-After, until it succeeds or the fleet stops. Other
answers (404, 409, 422, 403) are the caller's to handle.
"""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import urllib3

from simdra._driver.fleet.metrics import FleetMetrics
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.slices.backoff import Backoff

log = logging.getLogger("simdra._driver.fleet")

T = TypeVar("T")
CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


class Stopped(Exception):
    """The fleet is stopping: the call was abandoned."""


def transient(exc: BaseException) -> bool:
    """True for what waiting fixes: throttling, server errors, no connection."""
    if isinstance(exc, ApiStatusError):
        return exc.status == 429 or exc.status >= 500
    return isinstance(exc, CONNECTION_ERRORS)


def call(action: str, verb: str, fn: Callable[[], T], *, stop: threading.Event,
         metrics: FleetMetrics, backoff: Backoff) -> T:
    """`fn()`, retried while it fails transiently (each failure counted under `verb`);
    Stopped once `stop` is set. The client counts the requests themselves."""
    attempt = 0
    while True:
        if stop.is_set():
            raise Stopped(action)
        try:
            return fn()
        except Exception as exc:
            if not transient(exc):
                raise
            delay = backoff.delay(attempt, getattr(exc, "retry_after", None))
            attempt += 1
            metrics.api_error(verb)
            log.warning("%s failed: %s; retrying in %.2fs", action, _one_line(exc), delay)
            stop.wait(delay)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
