"""The grpc.health.v1 service behind the liveness probe, against a real kubelet plugin."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.endpoints import KubeletPlugin
from simdra._driver.kubelet.gen import dra_v1_pb2, dra_v1_pb2_grpc
from simdra._driver.kubelet.healthcheck import (
    READINESS_SERVICE,
    HealthcheckError,
    HealthcheckServer,
    probe_unix_socket,
    start_healthcheck_server,
)

from .fakes import DRIVER, Dirs, FakePreparer

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

StartPlugin = Callable[..., KubeletPlugin]


@pytest.fixture
def plugin(start_plugin: StartPlugin) -> KubeletPlugin:
    return start_plugin()


@pytest.fixture
def start_health(plugin: KubeletPlugin) -> Iterator[Callable[..., HealthcheckServer]]:
    """start_health(**kwargs): a health server on 127.0.0.1 probing the plugin's sockets."""
    started: list[HealthcheckServer] = []

    def start(**kwargs: Any) -> HealthcheckServer:
        kwargs.setdefault("cache_seconds", 0.0)
        kwargs.setdefault("service_names", ("", DRIVER))
        probes = kwargs.pop("probes", [plugin.dra_socket, plugin.registration_socket])
        server = start_healthcheck_server(0, probes, "127.0.0.1", **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def check(server: HealthcheckServer, service: str = "") -> int:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        return int(response.status)


def test_serving_while_both_sockets_answer(start_health: Callable[..., HealthcheckServer]) -> None:
    server = start_health()
    assert server.port > 0
    assert check(server) == SERVING
    assert check(server, DRIVER) == SERVING
    with pytest.raises(grpc.RpcError) as info:
        check(server, "no.such.service")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_not_serving_when_the_dra_socket_is_gone(
    plugin: KubeletPlugin, start_health: Callable[..., HealthcheckServer]
) -> None:
    server = start_health()
    assert check(server) == SERVING
    # The DRA server still runs, but the kubelet can no longer reach it.
    os.unlink(plugin.dra_socket)
    assert check(server) == NOT_SERVING
    assert check(server, DRIVER) == NOT_SERVING


def test_not_serving_after_the_plugin_stops(
    plugin: KubeletPlugin, start_health: Callable[..., HealthcheckServer]
) -> None:
    server = start_health()
    assert check(server) == SERVING
    plugin.stop(grace=0)
    assert check(server) == NOT_SERVING


def test_not_serving_when_the_registration_socket_is_gone(
    plugin: KubeletPlugin, start_health: Callable[..., HealthcheckServer]
) -> None:
    server = start_health()
    os.unlink(plugin.registration_socket)
    assert check(server) == NOT_SERVING


def test_readiness_follows_its_check_and_liveness_ignores_it(
    plugin: KubeletPlugin, start_health: Callable[..., HealthcheckServer]
) -> None:
    ready = threading.Event()
    server = start_health(readiness=ready.is_set)
    assert check(server, READINESS_SERVICE) == NOT_SERVING
    assert check(server) == SERVING
    ready.set()
    assert check(server, READINESS_SERVICE) == SERVING
    # A plugin the kubelet cannot reach is not ready, whatever its own check says.
    os.unlink(plugin.registration_socket)
    assert check(server, READINESS_SERVICE) == NOT_SERVING


def test_no_readiness_service_without_a_readiness_check(
    start_health: Callable[..., HealthcheckServer],
) -> None:
    server = start_health()
    with pytest.raises(grpc.RpcError) as info:
        check(server, READINESS_SERVICE)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_socket_that_never_answers_is_not_alive(dirs: Dirs) -> None:
    os.makedirs(dirs.root, exist_ok=True)
    path = os.path.join(dirs.root, "mute.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
        mute.bind(path)
        mute.listen(8)  # accepts connections (the kernel does), never speaks gRPC
        assert probe_unix_socket(path, timeout=0.2) is False


def test_a_slow_prepare_does_not_fail_liveness(
    plugin: KubeletPlugin, preparer: FakePreparer,
    start_health: Callable[..., HealthcheckServer],
) -> None:
    entered, release = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        release.wait(30)

    preparer.on_call = block
    server = start_health()
    claim = ClaimRef(namespace="ns", name="c", uid="uid-1")
    with grpc.insecure_channel(f"unix:{plugin.dra_socket}") as channel:
        stub = dra_v1_pb2_grpc.DRAPluginStub(channel)
        request = dra_v1_pb2.NodePrepareResourcesRequest(claims=[
            dra_v1_pb2.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)])
        pending = stub.NodePrepareResources.future(request, timeout=30)
        try:
            assert entered.wait(10)
            assert check(server) == SERVING  # the prepare still runs
        finally:
            release.set()
        assert claim.uid in pending.result().claims
    assert [step for step, _ in preparer.calls] == ["prepare"]  # probes call no DRA method


def test_a_probe_storm_probes_once_per_cache_period(
    plugin: KubeletPlugin, start_health: Callable[..., HealthcheckServer]
) -> None:
    probed: list[str] = []
    lock = threading.Lock()

    def counting_probe(path: str, timeout: float) -> bool:
        with lock:
            probed.append(path)
        return probe_unix_socket(path, timeout)

    server = start_health(probe=counting_probe, cache_seconds=3600.0)
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: check(server), range(64)))
    assert results == [SERVING] * 64
    assert sorted(probed) == sorted([plugin.dra_socket, plugin.registration_socket])


def test_watch_reports_the_status_and_ends_on_stop(
    start_health: Callable[..., HealthcheckServer],
) -> None:
    server = start_health()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(stream).status == SERVING
        server.stop()
        statuses = []
        with pytest.raises(grpc.RpcError):
            for response in stream:  # NOT_SERVING may arrive before the stream is cut
                statuses.append(response.status)
        assert set(statuses) <= {NOT_SERVING}


def test_a_busy_port_is_a_clear_error(start_health: Callable[..., HealthcheckServer],
                                      plugin: KubeletPlugin) -> None:
    server = start_health()
    with pytest.raises(HealthcheckError, match=f"127.0.0.1:{server.port}"):
        start_healthcheck_server(server.port, [plugin.dra_socket], "127.0.0.1")


def test_stop_leaves_no_threads(plugin: KubeletPlugin) -> None:
    before = set(threading.enumerate())
    server = start_healthcheck_server(0, [plugin.dra_socket, plugin.registration_socket],
                                      "127.0.0.1", cache_seconds=0.0)
    assert check(server) == SERVING
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(stream).status == SERVING
        server.stop()
        server.stop()  # idempotent
    # gRPC's serving thread ends just after stop() returns; give it a moment.
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set()
