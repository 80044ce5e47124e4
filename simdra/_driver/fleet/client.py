"""The fleet's API client: simdra's RestClient, counting every request by verb.

All of the fleet's calls, its publishers' included, go through one client, so
`simdra_fleet_api_requests_total` is what the API server saw from this process. It also
caps the requests in flight at its connection count: a thousand nodes' publishers
starting at once wait their turn instead of opening a thousand connections (which an
API server answers with resets or 429s). Watches, which stay open, are not capped.
"""

from __future__ import annotations

import threading
from typing import Any

from simdra._driver.fleet.metrics import FleetMetrics, verb_of
from simdra._driver.kube import load_api_client
from simdra._driver.kubeapi.client import RestClient

SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


class CountingClient(RestClient):
    """A RestClient whose requests and watches are counted in `metrics`."""

    def __init__(self, base: RestClient, metrics: FleetMetrics, connections: int) -> None:
        super().__init__(base.access, connections=connections)
        self._metrics = metrics
        self._in_flight = threading.BoundedSemaphore(connections)

    def request(self, method: str, path: str, **options: Any) -> Any:
        """As RestClient.request, counted (slice writes also as slice writes)."""
        self._metrics.request(verb_of(method))
        if method != "GET" and path.startswith(SLICES_PATH):
            self._metrics.slice_writes.inc()
        with self._in_flight:
            return super().request(method, path, **options)

    def watch(self, path: str, query: Any, timeout: Any) -> Any:
        """As RestClient.watch, counted."""
        self._metrics.request(verb_of("GET", watch=True))
        return super().watch(path, query, timeout)


def fleet_client(kubeconfig: str | None, metrics: FleetMetrics,
                 connections: int = 32) -> CountingClient:
    """A counting client from a kubeconfig (None: in-cluster); load_api_client's one-line
    error when neither works."""
    base = load_api_client(kubeconfig)
    base.close()  # only its access (server, TLS, credentials) is used
    return CountingClient(base, metrics, connections)
