"""`RestClient`: JSON requests and watches on one pool of connections to the API
server, with the credentials of a ClusterAccess.

urllib3's own retries are off: every caller retries with its own backoff and logs each
attempt once, and a second retry layer underneath would multiply attempts and lines.
A failed answer raises ApiStatusError; no answer raises what urllib3 or the socket
raised (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import urllib3

from simdra._driver.kubeapi.access import ClusterAccess
from simdra._driver.kubeapi.errors import ApiStatusError
from simdra._driver.kubeapi.tls import tls_context

JSON_TYPE = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# A number: one limit for the whole request; a pair: (connect, read) seconds.
Timeout = float | tuple[float, float]
Query = Mapping[str, str | int | bool]
DEFAULT_TIMEOUT: Timeout = (10.0, 30.0)


class RestClient:
    """Requests to one API server over up to `connections` kept-open connections."""

    def __init__(self, access: ClusterAccess, connections: int = 10) -> None:
        self.access = access
        self._base = access.server.rstrip("/")
        https = self._base.startswith("https:")
        options: dict[str, Any] = {"ssl_context": tls_context(access)} if https else {}
        if https and access.tls_server_name:
            options["server_hostname"] = access.tls_server_name
        self._pool = urllib3.PoolManager(num_pools=2, maxsize=connections, retries=False,
                                         **options)

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.clear()

    def request(self, method: str, path: str, *, query: Query | None = None,
                body: Any = None, content_type: str = JSON_TYPE,
                timeout: Timeout = DEFAULT_TIMEOUT,
                object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
        """One request; the decoded JSON answer ({} for an empty one). `body` is sent
        as JSON (also for apply-patch+yaml: JSON is YAML); `object_hook` as json.loads'.
        ApiStatusError for an answer outside 2xx."""
        response = self._send(method, path, query, body, content_type, timeout, True)
        _check(response)
        return json.loads(response.data or b"{}", object_hook=object_hook)

    def request_bytes(self, method: str, path: str, *, query: Query | None = None,
                      timeout: Timeout = DEFAULT_TIMEOUT) -> bytes:
        """One request without a body; the answer as the server sent it, for a reader
        that decodes only what it needs. ApiStatusError for an answer outside 2xx."""
        response = self._send(method, path, query, None, JSON_TYPE, timeout, True)
        _check(response)
        return response.data or b""

    def watch(self, path: str, query: Query, timeout: Timeout) -> Watch:
        """A watch (`watch=true` added to `query`): iterate it for the events, close it
        (from any thread) to end it. ApiStatusError when the server refuses it."""
        response = self._send("GET", path, {**query, "watch": True}, None, JSON_TYPE,
                              timeout, False)
        if not 200 <= response.status < 300:
            response.read()
            response.release_conn()
            _check(response)
        return Watch(response)

    def _send(self, method: str, path: str, query: Query | None, body: Any,
              content_type: str, timeout: Timeout, preload: bool) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": JSON_TYPE, "User-Agent": "simdra",
                   **self.access.credentials.headers()}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        return self._pool.request(method, self._base + path + _query_text(query), body=data,
                                  headers=headers, timeout=_timeout(timeout),
                                  preload_content=preload)


class Watch:
    """The events of one watch as decoded JSON objects ({"type", "object"}), one per
    line of the answer; ends when the server ends the watch or `close()` is called."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._closed = False
        self._started = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        pending = b""
        self._started = True
        try:
            for chunk in self._chunks():
                *lines, pending = (pending + chunk).split(b"\n")
                yield from (json.loads(line) for line in lines if line.strip())
            if pending.strip() and not self._closed:
                yield json.loads(pending)
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            if not self._closed:  # a closed watch ends quietly, whatever reading raised
                raise
        finally:
            # Never back into the pool: a watch left early has unread data on it.
            self._response.close()
            self._response.release_conn()

    def _chunks(self) -> Iterator[bytes]:
        response = self._response
        if response.chunked:  # how the API server sends watches: each chunk as it comes
            yield from response.read_chunked(decode_content=True)
            return
        while chunk := response.read1(64 * 1024):
            yield chunk

    def close(self) -> None:
        """End the watch: a read in progress (on another thread) returns at once."""
        self._closed = True
        if not self._started:
            self._response.close()
            return
        with contextlib.suppress(ValueError, RuntimeError, OSError):  # ended already
            self._response.shutdown()


def _check(response: urllib3.BaseHTTPResponse) -> None:
    if not 200 <= response.status < 300:
        raise ApiStatusError(response.status, response.reason or "", response.data or b"",
                             response.headers)


def _query_text(query: Query | None) -> str:
    if not query:
        return ""
    pairs = {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
             for k, v in query.items()}
    return "?" + urlencode(pairs)


def _timeout(timeout: Timeout) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)
