"""DRAResourceHealth servicers (v1alpha1 and v1): device health streamed to the kubelet.

The kubelet opens NodeWatchResources and expects every message to list all devices of
the driver (api-facts 3.2, 3.3). Where the health comes from is a `HealthSource`; `HealthBoard`
is a simple one that callers feed with `update()`. The states themselves
(`DeviceHealth`, `HealthStatus`) are defined in `simdra._driver.core.health`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, Protocol

import grpc

# The health states live on the ground floor (the device lane reports them without
# importing gRPC); re-exported here for callers that import them from this module.
from simdra._driver.core.health import DeviceHealth as DeviceHealth
from simdra._driver.core.health import HealthStatus as HealthStatus
from simdra._driver.kubelet.gen import (
    dra_health_v1_pb2,
    dra_health_v1_pb2_grpc,
    dra_health_v1alpha1_pb2,
    dra_health_v1alpha1_pb2_grpc,
)

log = logging.getLogger(__name__)

# The kubelet truncates longer messages the same way.
MAX_MESSAGE_CHARS = 1024


class HealthSource(Protocol):
    """Where the health stream gets its data."""

    def watch(self, stop: threading.Event) -> Iterator[Sequence[DeviceHealth]]:
        """Yield the full device-health list now and again on every change.

        Must return soon (within about a second) after `stop` is set: it is set when the
        kubelet closes the stream or the plugin stops, and then the source's `wake()`
        is called, if it has one (so that its watchers need not poll `stop`).
        """
        ...


def clip_message(text: str) -> str:
    """Limit a health message to MAX_MESSAGE_CHARS, marking the cut with '...'."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return text[: MAX_MESSAGE_CHARS - 3] + "..."


def watch_response(pb: ModuleType, devices: Iterable[DeviceHealth], now: int) -> Any:
    """Build `NodeWatchResourcesResponse` for one full device list."""
    return pb.NodeWatchResourcesResponse(
        devices=[
            pb.DeviceHealth(
                device=pb.DeviceIdentifier(pool_name=d.pool_name, device_name=d.device_name),
                health=int(d.health),
                last_updated_time=d.last_updated or now,
                health_check_timeout_seconds=d.timeout_seconds,
                message=clip_message(d.message),
            )
            for d in devices
        ]
    )


class ResourceHealthServicer:
    """Shared implementation of NodeWatchResources for both API versions."""

    version = ""
    _pb: ModuleType

    def __init__(self, source: HealthSource) -> None:
        """source: what the stream reports."""
        self._source = source
        self._lock = threading.Lock()
        self._streams: set[threading.Event] = set()
        self._closed = False

    def NodeWatchResources(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        """Stream full device-health lists until the kubelet or the plugin ends it."""
        stop = threading.Event()
        context.add_callback(lambda: self._end(stop))
        with self._lock:
            if self._closed:
                stop.set()
            self._streams.add(stop)
        log.info("%s health stream opened", self.version)
        updates = self._source.watch(stop)
        try:
            sent: tuple[Sequence[DeviceHealth], Any] | None = None
            for devices in updates:
                if stop.is_set():
                    break
                sent = self._response(devices, sent)
                yield sent[1]
        finally:
            # gRPC may drop a cancelled stream without asking for the next message, so
            # tell the source here rather than rely on it noticing `stop` in time.
            self._end(stop)
            close = getattr(updates, "close", None)
            if close is not None:
                close()
            with self._lock:
                self._streams.discard(stop)
            log.info("%s health stream closed", self.version)

    def _response(self, devices: Sequence[DeviceHealth],
                  sent: tuple[Sequence[DeviceHealth], Any] | None,
                  ) -> tuple[Sequence[DeviceHealth], Any]:
        """The message for `devices`: a re-send of the same list (the keep-alive every
        few seconds) reuses the last message with fresh times, which costs a tenth of
        building 10,000 entries again. gRPC has serialized it before asking for more."""
        now = int(time.time())
        if sent is None or sent[0] is not devices:
            return devices, watch_response(self._pb, devices, now)
        for health, entry in zip(devices, sent[1].devices, strict=True):
            if not health.last_updated:
                entry.last_updated_time = now
        return sent

    def _end(self, stop: threading.Event) -> None:
        """End one stream: set its `stop` and wake the source's watchers to see it."""
        stop.set()
        wake = getattr(self._source, "wake", None)
        if wake is not None:
            wake()

    def close(self) -> None:
        """End all open streams and refuse new ones (used when the plugin stops)."""
        with self._lock:
            self._closed = True
            streams = list(self._streams)
        for stop in streams:
            self._end(stop)


class ResourceHealthV1alpha1(
    ResourceHealthServicer, dra_health_v1alpha1_pb2_grpc.DRAResourceHealthServicer
):
    """v1alpha1.DRAResourceHealth (kubelet 1.34+)."""

    version = "v1alpha1"
    _pb = dra_health_v1alpha1_pb2


class ResourceHealthV1(ResourceHealthServicer, dra_health_v1_pb2_grpc.DRAResourceHealthServicer):
    """v1.DRAResourceHealth (kubelet 1.37+)."""

    version = "v1"
    _pb = dra_health_v1_pb2


def add_health_services(
    server: grpc.Server, source: HealthSource
) -> tuple[list[str], list[ResourceHealthServicer]]:
    """Register both health versions; return their full service names and servicers."""
    alpha, ga = ResourceHealthV1alpha1(source), ResourceHealthV1(source)
    dra_health_v1alpha1_pb2_grpc.add_DRAResourceHealthServicer_to_server(alpha, server)
    dra_health_v1_pb2_grpc.add_DRAResourceHealthServicer_to_server(ga, server)
    names = [
        dra_health_v1alpha1_pb2.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name,
        dra_health_v1_pb2.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name,
    ]
    return names, [alpha, ga]


class HealthBoard:
    """A HealthSource fed by `update()`.

    Every watcher gets the current list at once, then each new list. The list is also
    re-sent every `resend_seconds` so that the kubelet, which marks a device Unknown when
    it has not heard of it for its timeout (30 s by default), keeps it fresh. A watcher
    sleeps until one of these or `wake()` (its stream ended): no timed polling, so an
    idle stream costs one wake-up per re-send.
    """

    def __init__(self, devices: Iterable[DeviceHealth] = (), resend_seconds: float = 10.0):
        """devices: the initial list; resend_seconds: keep-alive period of the stream."""
        self._cond = threading.Condition()
        self._devices = tuple(devices)
        self._generation = 0
        self._resend = resend_seconds

    def update(self, devices: Iterable[DeviceHealth]) -> None:
        """Replace the full device list and wake every watcher."""
        with self._cond:
            self._devices = tuple(devices)
            self._generation += 1
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake every watcher to look at its `stop` (the servicer calls it on setting one)."""
        with self._cond:
            self._cond.notify_all()

    def watch(self, stop: threading.Event) -> Iterator[Sequence[DeviceHealth]]:
        """Yield the current list, then every update (see the class docstring)."""
        while not stop.is_set():
            with self._cond:
                generation, devices = self._generation, self._devices
            yield devices
            deadline = time.monotonic() + self._resend
            with self._cond:  # `stop` is checked under the lock `wake()` takes: no lost wake-up
                while not stop.is_set() and self._generation == generation:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
