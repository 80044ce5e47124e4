"""The HTTP endpoint Prometheus scrapes: every path answers with the registry's metrics.

Built on the standard library's WSGI server rather than prometheus_client's
`start_http_server`, whose return value differs between versions; ours has a `stop()`
that closes the socket and joins every thread it started.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

# A scraper that connects and sends nothing must not hold a handler thread (and stop())
# forever.
REQUEST_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.05  # how soon stop() is noticed by the accept loop


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape on stderr."""

    timeout = REQUEST_TIMEOUT_SECONDS

    def log_message(self, format: str, *args: object) -> None:
        log.debug("metrics request: " + format, *args)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per scrape; server_close() joins them all."""

    daemon_threads = False
    block_on_close = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """A running metrics endpoint; `stop()` (or leaving the `with` block) ends it."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
        """Bind `addr:port` (port 0: any free port) and serve in a background thread."""
        server_class = _ThreadingServer6 if ":" in addr else _ThreadingServer
        self._httpd = make_server(addr, port, make_wsgi_app(registry), server_class,
                                  handler_class=_QuietHandler)
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        args=(POLL_SECONDS,), name=f"metrics-{self.port}",
                                        daemon=True)
        self._thread.start()
        self._stopped = False
        log.info("serving metrics on %s:%d", addr, self.port)

    def stop(self) -> None:
        """Stop accepting, wait for scrapes in progress, close the socket. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_metrics_server(
    registry: CollectorRegistry, port: int, addr: str = "0.0.0.0"
) -> tuple[MetricsServer, int]:
    """Serve `registry` on `addr:port`; returns the server and the port actually bound
    (useful with port 0). Raises OSError when the address cannot be bound."""
    server = MetricsServer(registry, port, addr)
    return server, server.port
