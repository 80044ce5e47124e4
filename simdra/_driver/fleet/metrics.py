"""The fleet's counters, served as Prometheus text on --metrics-port and summed up in
the final log line. Thread-safe: prometheus_client's metrics lock themselves."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}


def verb_of(method: str, watch: bool = False) -> str:
    """The Kubernetes verb of an HTTP request (GET of a collection counts as get)."""
    return "watch" if watch else _VERBS.get(method.upper(), method.lower())


class FleetMetrics:
    """simdra_fleet_* metrics in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.nodes = Gauge("simdra_fleet_nodes", "Nodes this fleet replica plays", registry=r)
        self.slices = Gauge("simdra_fleet_slices", "ResourceSlices of the played nodes, "
                            "as last observed", registry=r)
        self.slice_writes = Counter("simdra_fleet_slice_writes", "ResourceSlice creates, "
                                    "updates and deletes by the fleet's publishers",
                                    registry=r)
        self.requests = Counter("simdra_fleet_api_requests", "Requests sent to the API "
                                "server, by verb", ["verb"], registry=r)
        self.errors = Counter("simdra_fleet_api_errors", "Requests that failed and were "
                              "retried, by verb", ["verb"], registry=r)
        self.prepared = Counter("simdra_fleet_claims_prepared", "Claims prepared on fleet "
                                "nodes (status.devices written)", registry=r)
        self.unprepared = Counter("simdra_fleet_claims_unprepared", "Claims freed on fleet "
                                  "nodes", registry=r)
        self.churn = Counter("simdra_fleet_churn_events", "Churn events, by kind", ["kind"],
                             registry=r)

    def request(self, verb: str) -> None:
        """Count one request."""
        self.requests.labels(verb=verb).inc()

    def api_error(self, verb: str) -> None:
        """Count one failed (and retried) request."""
        self.errors.labels(verb=verb).inc()

    def serve(self, port: int) -> int:
        """Serve /metrics on `port` (0: any free port); returns the port."""
        server, _thread = start_http_server(port, registry=self.registry)
        return int(server.server_port)
