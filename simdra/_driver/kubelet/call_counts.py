"""Every call the kubelet makes on the plugin's sockets, counted by service, method and
gRPC status code.

The kubelet's sockets serve before the metrics exist (`simdra._driver.kubelet.early`), so the
counts live here, in a `KubeletCalls` that the server's interceptor feeds from its first
call on; the metrics registry reads it at each scrape
(`simdra._driver.observability.metrics`: simdra_kubelet_calls_total).

service is the name the plugin advertises for it ("v1.DRAPlugin", "v1beta1.DRAPlugin",
"v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth") or the registration service's,
"pluginregistration.Registration"; method is the gRPC method ("NodePrepareResources").
code is the status the call ended with ("OK", "UNKNOWN" for an exception or a rejected
registration, ...), "CANCELLED" when the kubelet gave up on it first (closed a health
stream, or its deadline passed before the answer); a method the plugin does not serve
counts as service and method "unknown", code "UNIMPLEMENTED". The plugin's own liveness
probe of its sockets (`simdra._driver.kubelet.healthcheck`: a method no server serves,
called on both sockets at each of the DaemonSet's probes) is no kubelet call and is not
counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc

from simdra._driver.kubelet.healthcheck import PROBE_METHOD
from simdra._driver.kubelet.services import advertised_name

OK, CANCELLED, UNKNOWN = "OK", "CANCELLED", "UNKNOWN"
UNSERVED = ("unknown", "unknown")

CallKey = tuple[str, str, str]  # service, method, code


class KubeletCalls:
    """Call counts by (service, method, code); thread-safe."""

    def __init__(self, methods: Iterable[tuple[str, str]] = ()) -> None:
        """methods: (service, method) pairs shown at 0 with code OK before their first
        call, so that a rate over them is defined from the start."""
        self._lock = threading.Lock()
        self._counts: dict[CallKey, int] = {(s, m, OK): 0 for s, m in methods}

    def add(self, service: str, method: str, code: str) -> None:
        """Count one call."""
        key = (service, method, code)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def snapshot(self) -> dict[CallKey, int]:
        """Every count so far."""
        with self._lock:
            return dict(self._counts)


def service_and_method(full_method: str) -> tuple[str, str]:
    """"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources" ->
    ("v1.DRAPlugin", "NodePrepareResources")."""
    service, _, method = full_method.lstrip("/").partition("/")
    return advertised_name(service), method


class CallCounter(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc has no stubs
    """Counts each call into a `KubeletCalls` once it ended (see the module docstring)."""

    def __init__(self, calls: KubeletCalls) -> None:
        self.calls = calls

    def intercept_service(self, continuation: Callable[[Any], Any],
                          handler_call_details: Any) -> Any:
        """The method's handler, wrapped to count the call when it ends."""
        handler = continuation(handler_call_details)
        if handler is None:  # gRPC answers UNIMPLEMENTED
            if handler_call_details.method != PROBE_METHOD:
                self.calls.add(*UNSERVED, "UNIMPLEMENTED")
            return None
        service, method = service_and_method(handler_call_details.method)
        record = _Recorder(self.calls, service, method)
        if handler.response_streaming:
            return _replace(handler, record.wrap_stream)
        return _replace(handler, record.wrap_unary)


class _Recorder:
    """Wraps one method's behaviour so that each of its calls is counted exactly once."""

    def __init__(self, calls: KubeletCalls, service: str, method: str) -> None:
        self._calls, self._service, self._method = calls, service, method

    def wrap_unary(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                response = behavior(request, context)
            except BaseException:
                self._count(_code(context, UNKNOWN))
                raise
            self._count(_code(context, OK) if context.is_active() else CANCELLED)
            return response

        return unary

    def wrap_stream(self, behavior: Callable[..., Iterator[Any]]) -> Callable[..., Any]:
        def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            once = _Once(self._count)
            # Runs when the call is over, however it ended: a stream the kubelet closed
            # is never asked for its next message, so it would not count itself.
            context.add_callback(lambda: once(CANCELLED))
            try:
                responses = iter(behavior(request, context))
            except BaseException:
                once(_code(context, UNKNOWN))
                raise
            return _counted(responses, context, once)

        return stream

    def _count(self, code: str) -> None:
        self._calls.add(self._service, self._method, code)


class _Once:
    """Calls `count` with the first code it is given, and ignores the rest."""

    def __init__(self, count: Callable[[str], None]) -> None:
        self._count = count
        self._lock = threading.Lock()
        self._done = False

    def __call__(self, code: str) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._count(code)


def _counted(responses: Iterator[Any], context: grpc.ServicerContext,
             once: _Once) -> Iterator[Any]:
    try:
        yield from responses
    except GeneratorExit:  # dropped unfinished: the call was cancelled
        once(CANCELLED)
        raise
    except BaseException:
        once(_code(context, UNKNOWN))
        raise
    once(_code(context, OK) if context.is_active() else CANCELLED)


def _code(context: grpc.ServicerContext, default: str) -> str:
    """The code the servicer set (`abort`, `set_code`), else `default`."""
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else default


def _replace(handler: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Any:
    """`handler` with its one behaviour wrapped (grpc's RpcMethodHandler is a namedtuple)."""
    for field in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        behavior = getattr(handler, field)
        if behavior is not None:
            return handler._replace(**{field: wrap(behavior)})
    return handler
