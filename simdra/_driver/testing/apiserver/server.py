"""The HTTP server and the public `APIServer`: a kube-apiserver stand-in for tests and demos.

One `ThreadingHTTPServer` on 127.0.0.1 with HTTP/1.1 keep-alive; watches are streamed
as chunked JSON lines. `stop()` ends every watch, closes every open connection and joins
every request thread, so nothing outlives the server.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import select
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from simdra._driver.kubeapi import ClusterAccess, RestClient
from simdra._driver.testing.apiserver import errors, lifecycle
from simdra._driver.testing.apiserver.faults import Faults, RequestLog, Stall
from simdra._driver.testing.apiserver.gates import DEFAULT_GATES
from simdra._driver.testing.apiserver.handlers import API, Config, HTTPRequest, Reply
from simdra._driver.testing.apiserver.resources import by_plural
from simdra._driver.testing.apiserver.store import ANY, Store, key_of
from simdra._driver.testing.apiserver.watch import WatchRequest, stream
from simdra._driver.testing.kubeconfig import write_kubeconfig

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked watch streams
    # Headers and body go out in separate writes; with Nagle on, each answer would wait
    # for the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("apiserver %s: " + format, self.client_address, *args)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        request = HTTPRequest(
            method=self.command,
            path=url.path,
            query=dict(parse_qsl(url.query, keep_blank_values=True)),
            content_type=(self.headers.get("Content-Type") or "").split(";")[0].strip(),
            body=self._read_body(),
        )
        try:
            result = self.server.api.serve(request)
        except Exception as exc:  # a bug in the stand-in must still answer like a server
            log.exception("apiserver: %s %s failed", self.command, self.path)
            self.server.internal_errors.append(
                f"{self.command} {url.path}: {type(exc).__name__}: {exc}")
            error = errors.internal(f"{type(exc).__name__}: {exc}")
            result = Reply(error.code, error.status())
        if isinstance(result, WatchRequest):
            config = self.server.api.config
            lines = stream(self.server.api.store, result, config.bookmark_interval,
                           self._client_gone,
                           too_large_wait=config.too_large_resource_version_wait)
            self._stream(lines)
        else:
            self._reply(result)

    def _client_gone(self) -> bool:
        """True when the peer closed the connection (readable, but nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reply(self, reply: Reply) -> None:
        data = json.dumps(reply.body, separators=(",", ":")).encode()
        self.send_response(reply.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, lines: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line in lines:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client went away or the server is stopping


class _Server(ThreadingHTTPServer):
    # Non-daemon request threads, joined by server_close(): nothing outlives stop().
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: API) -> None:
        super().__init__(address, _Handler)
        self.api = api
        self.internal_errors: list[str] = []  # shared with APIServer.internal_errors
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Connections cut by stop() or by clients end with socket errors: not worth a trace.
        log.debug(
            "apiserver: connection from %s ended with an error", client_address, exc_info=True
        )

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Unblock every request thread (idle keep-alive reads, watch writes)."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class APIServer:
    """A kube-apiserver stand-in on 127.0.0.1 for nodes and resource.k8s.io/v1 objects.

    Serves nodes, pods, resourceslices, resourceclaims (+ /status), resourceclaimtemplates
    and deviceclasses with the real server's REST paths, JSON, errors, resourceVersions,
    optimistic concurrency, validation (OpenAPI strict + ResourceSlice semantic rules) and
    watches. Use as a context manager, or call `start()` / `stop()`.

    Test hooks: `inject_failure`, `stall`, `request_log` / `writes()`, `feature_gates`,
    `objects` / `get_object` / `put_object` / `delete_object`, `compact`.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kubernetes_version: str = "1.37",
        feature_gates: Mapping[str, bool] | None = None,
        history_limit: int = 100_000,
        bookmark_interval: float = 60.0,
        too_large_resource_version_wait: float = 3.0,
    ) -> None:
        gates = dict(DEFAULT_GATES)
        gates.update(feature_gates or {})
        self.store = Store(history_limit)
        self.config = Config(
            kubernetes_version, gates, bookmark_interval, too_large_resource_version_wait
        )
        self.faults = Faults()
        self.request_log = RequestLog()
        self._api = API(self.store, self.config, self.faults, self.request_log)
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        # "<verb> <path>: <exception>" of every request the stand-in itself failed (500
        # without an injected fault): a bug here, which waiting clients cannot outlast.
        self.internal_errors: list[str] = []

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> APIServer:
        """Bind and serve in a background thread; returns self.

        After `stop()` this is a restart: same port, same objects and history (etcd
        outlives the API server), so clients built before keep working.
        """
        if self._server is not None:
            return self
        self.store.reopen()
        self._server = _Server(self._address, self._api)
        self._server.internal_errors = self.internal_errors
        self._address = (self._address[0], self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"apiserver-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End watches, close connections, join every thread. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self.store.close()
        server.shutdown()
        server.close_connections()
        server.server_close()  # joins the request threads
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> APIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port (ephemeral unless one was given)."""
        if self._server is None:
            raise RuntimeError("the API server is not running; call start() first")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://{self._address[0]}:{self.port}"

    # --- clients ---------------------------------------------------------------------

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """Write a kubeconfig pointing at this server; returns the path."""
        return write_kubeconfig(path, self.url, namespace)

    def api_client(self) -> ApiClient:
        """A new official-client `ApiClient` for this server (caller closes it)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def rest_client(self) -> RestClient:
        """A new client of the plugin's own (`simdra._driver.kubeapi`) for this server, as the
        plugin's publisher, claim reader and status writer take it (caller closes it)."""
        return RestClient(ClusterAccess(server=self.url))

    # --- test hooks ------------------------------------------------------------------

    @property
    def feature_gates(self) -> dict[str, bool]:
        """The live gate table; set e.g. `["DRAConsumableCapacity"] = False` to drop fields."""
        return self.config.feature_gates

    def inject_failure(
        self, verb: str, resource: str, code: int, count: int = 1, retry_after: int | None = None
    ) -> None:
        """Make the next `count` requests of `verb` on `resource` fail with HTTP `code`.

        `resource` is a plural ("resourceslices"), a subresource ("resourceclaims/status")
        or "*"; `verb` one of get/list/watch/create/update/patch/delete/deletecollection or
        "*". A 429 carries `Retry-After` when `retry_after` is given. Note that the
        official client (urllib3) itself retries GET/PUT/DELETE answered 429/503 with a
        Retry-After header, so inject those on POST or without retry_after to see them.
        """
        self.faults.inject(verb, resource, code, count, retry_after)

    def stall(self, verb: str, resource: str, seconds: float, together: int) -> Stall:
        """Slow requests of `verb` on `resource` ("*" matches any): each waits up to
        `seconds`, unless `together` of them are in flight at once (then all go on).
        The returned Stall's `max_in_flight` says how many ever were at once."""
        return self._api.stalls.add(Stall(verb, resource, seconds, together))

    def writes(self, resource: str | None = None) -> int:
        """Mutating requests received so far (optionally on one resource)."""
        return self.request_log.writes(resource)

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion."""
        return self.store.resource_version

    def objects(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Deep copies of the stored objects of `resource`, sorted by namespace/name."""
        items, _ = self.store.list(by_plural(resource).plural, namespace)
        return copy.deepcopy(items)

    def get_object(self, resource: str, name: str, namespace: str | None = None) -> JSON | None:
        """A deep copy of one stored object, or None."""
        obj = self.store.get(by_plural(resource).plural, (namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def put_object(self, resource: str, obj: JSON) -> JSON:
        """Store `obj` as given (no validation, no gates), creating or replacing it.

        Missing uid/creationTimestamp/generation are filled in; kind and apiVersion are
        set; watchers see ADDED or MODIFIED. Returns a copy of what was stored.
        """
        r = by_plural(resource)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if r.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        current = self.store.get(r.plural, key_of(obj))
        defaults = current["metadata"] if current else {}
        meta.setdefault("uid", defaults.get("uid") or str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", defaults.get("creationTimestamp") or lifecycle.now())
        meta.setdefault("generation", defaults.get("generation", 1))
        obj.update(kind=r.kind, apiVersion=r.api_version)
        return copy.deepcopy(self.store.commit(r.plural, key_of(obj), obj, ANY))

    def put_objects(self, resource: str, objs: Iterable[JSON]) -> list[JSON]:
        """`put_object` for several objects."""
        return [self.put_object(resource, o) for o in objs]

    def delete_object(self, resource: str, name: str, namespace: str | None = None) -> bool:
        """Delete one object directly (watchers see DELETED); False when it did not exist."""
        r = by_plural(resource)
        key = (namespace or ("default" if r.namespaced else ""), name)
        if self.store.get(r.plural, key) is None:
            return False
        self.store.commit(r.plural, key, None, ANY)
        return True

    def compact(self) -> int:
        """Drop the watch history, as etcd compaction does; older RVs now get 410."""
        return self.store.compact()
