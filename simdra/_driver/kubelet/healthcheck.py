"""The gRPC health service (`grpc.health.v1.Health`) behind the DaemonSet's liveness probe.

The plugin is alive when the kubelet can talk to it: both of its unix sockets (DRA and
registration) must answer. A probe opens a new connection to the socket, as the kubelet
would, and calls a method that no server implements: the answer UNIMPLEMENTED proves the
gRPC server behind the socket accepts and answers calls, without touching the plugin's
own services (a real DRA call would wait behind a prepare in progress, and a slow
prepare must not get the pod restarted). A missing socket fails at once; a server that
accepts but never answers fails after the probe timeout.

Readiness is a separate service name, `readiness` (READINESS_SERVICE), behind the
DaemonSet's readinessProbe: SERVING when the plugin is alive and its own readiness check
(registered with the kubelet, slices published) passes. Liveness never consults it, so
an API server outage or a kubelet that has not registered the plugin yet never gets the
pod restarted; it only keeps a rolling update from stopping the old pod.

Probes run when a check arrives, at most once per `cache_seconds` however many checks
come in at once; nothing runs in the background. Watch streams get the current status
when they open and every change a later check finds (the kubelet's probe uses Check).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

log = logging.getLogger(__name__)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

# A method no server implements: the probe wants any answer, not a service. The sockets'
# call counter leaves it out (simdra._driver.kubelet.call_counts): it is no kubelet call.
PROBE_METHOD = "/simdra.healthcheck.v1.Probe/NoSuchMethod"
# Answers that mean no server answered at all.
_DEAD = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

# The service name the DaemonSet's readinessProbe asks for (`grpc: {service: readiness}`).
READINESS_SERVICE = "readiness"

Probe = Callable[[str, float], bool]
Readiness = Callable[[], bool]


class HealthcheckError(RuntimeError):
    """The health server cannot listen on the requested address."""


def probe_unix_socket(path: str, timeout: float) -> bool:
    """True when a gRPC server answers on the unix socket `path` within `timeout`."""
    with grpc.insecure_channel(f"unix:{path}") as channel:
        call = channel.unary_unary(PROBE_METHOD)
        try:
            call(b"", timeout=timeout)
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
            if code in _DEAD:
                log.warning("health probe of %s failed: %s", path, code.name)
                return False
        return True


class SocketChecker:
    """Probes every socket; caches the verdict for `cache_seconds` (one probe at a time)."""

    def __init__(self, sockets: Sequence[str], probe: Probe, timeout: float,
                 cache_seconds: float) -> None:
        self._sockets = tuple(sockets)
        self._probe = probe
        self._timeout = timeout
        self._cache = cache_seconds
        self._lock = threading.Lock()
        self._verdict = False
        self._checked_at: float | None = None

    def alive(self) -> bool:
        """True when every socket answered (as of at most `cache_seconds` ago)."""
        with self._lock:
            now = time.monotonic()
            if self._checked_at is None or now - self._checked_at >= self._cache:
                # Short-circuits: one dead socket is enough to say no.
                self._verdict = all(self._probe(s, self._timeout) for s in self._sockets)
                self._checked_at = time.monotonic()
            return self._verdict


# grpc_health ships no type information: its servicer class is Any to mypy.
class _ProbingHealthServicer(health.HealthServicer):  # type: ignore[misc]
    """The library's servicer, with the status refreshed before each Check and Watch."""

    def __init__(self, refresh: Callable[[], object]) -> None:
        super().__init__()
        self._refresh = refresh

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Probe (or use the cached verdict), then answer like the library does."""
        self._refresh()
        return super().Check(request, context)

    def Watch(self, request: Any, context: grpc.ServicerContext,
              send_response_callback: Any = None) -> Any:
        """Probe, then stream like the library does."""
        self._refresh()
        return super().Watch(request, context, send_response_callback)


class HealthcheckServer:
    """A running health server; `port` is the TCP port it listens on."""

    def __init__(self, port: int, probes: Sequence[str], addr: str = "0.0.0.0", *,
                 service_names: Sequence[str] = ("", "simdra"),
                 probe_timeout: float = 1.0, cache_seconds: float = 1.0,
                 probe: Probe = probe_unix_socket, readiness: Readiness | None = None) -> None:
        """Start serving; see `start_healthcheck_server`."""
        self._names = tuple(service_names)
        self._checker = SocketChecker(probes, probe, probe_timeout, cache_seconds)
        self._readiness = readiness
        self._status_lock = threading.Lock()
        self._serving: bool | None = None
        self._ready: bool | None = None
        self._servicer = _ProbingHealthServicer(self.refresh)
        for name in self._all_names():
            self._servicer.set(name, NOT_SERVING)
        # Watch does not hold a worker (non-blocking servicer); Checks are short.
        self._executor = ThreadPoolExecutor(4, thread_name_prefix="simdra-healthcheck")
        # No SO_REUSEPORT: a second instance on the same port must fail, not share it.
        self._server = grpc.server(self._executor, options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, self._server)
        host = f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr
        try:
            self.port = self._server.add_insecure_port(f"{host}:{port}")
        except RuntimeError as err:
            self._shutdown()
            raise HealthcheckError(f"health server cannot listen on {host}:{port}: {err} "
                                   "(port in use, or a bad address?)") from err
        if not self.port:
            self._shutdown()
            raise HealthcheckError(f"health server cannot listen on {host}:{port}")
        self._server.start()
        log.info("gRPC health service on %s:%d (services %s), probing %s", host, self.port,
                 ", ".join(repr(n) for n in self._all_names()), ", ".join(probes))

    def _all_names(self) -> tuple[str, ...]:
        return self._names + ((READINESS_SERVICE,) if self._readiness is not None else ())

    def refresh(self) -> bool:
        """Probe now (or use the cached verdict) and publish the status; True if serving.

        Readiness (when configured) is alive and ready; liveness is alive alone.
        """
        serving = self._checker.alive()
        ready = serving and self._readiness is not None and self._readiness()
        with self._status_lock:
            if serving != self._serving:
                if self._serving is not None:
                    log.warning("health: %s", "SERVING again" if serving else "NOT_SERVING")
                self._serving = serving
                for name in self._names:
                    self._servicer.set(name, SERVING if serving else NOT_SERVING)
            if self._readiness is not None and ready != self._ready:
                log.info("readiness: %s", "ready" if ready else "not ready")
                self._ready = ready
                self._servicer.set(READINESS_SERVICE, SERVING if ready else NOT_SERVING)
        return serving

    def stop(self) -> None:
        """Tell open Watch streams NOT_SERVING, then stop the server and its threads.

        No grace period: checks take milliseconds, and a grace period would leave a gRPC
        timer thread behind. Idempotent.
        """
        self._servicer.enter_graceful_shutdown()
        self._shutdown()

    def _shutdown(self) -> None:
        self._server.stop(None).wait()
        self._executor.shutdown(wait=True)

    def __enter__(self) -> HealthcheckServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def start_healthcheck_server(
    port: int,
    probes: Sequence[str],
    addr: str = "0.0.0.0",
    *,
    service_names: Sequence[str] = ("", "simdra"),
    probe_timeout: float = 1.0,
    cache_seconds: float = 1.0,
    probe: Probe = probe_unix_socket,
    readiness: Readiness | None = None,
) -> HealthcheckServer:
    """Serve `grpc.health.v1.Health` on TCP `addr:port` (port 0: any free port, see `.port`).

    Every name in `service_names` ("" is the overall status the kubelet's probe asks
    for) is SERVING while a gRPC server answers on each unix socket in `probes`, and
    NOT_SERVING otherwise. With `readiness`, the name `readiness` is SERVING while that
    holds too and `readiness()` returns True (asked on each check; keep it cheap). Other
    names get NOT_FOUND. The wildcard address also covers IPv6. Raises HealthcheckError
    when the port cannot be bound.
    """
    return HealthcheckServer(port, probes, addr, service_names=service_names,
                             probe_timeout=probe_timeout, cache_seconds=cache_seconds,
                             probe=probe, readiness=readiness)
