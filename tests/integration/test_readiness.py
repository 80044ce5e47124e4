"""Readiness (the DaemonSet's readinessProbe, gRPC health service `readiness`): a plugin
process is ready only once the kubelet registered it and its slices are published, and
not ready again when the kubelet reports its registration failed. Liveness (service "")
never waits for the API server or the kubelet.

Everything goes through real sockets: the plugin is a `simdra run` process, the kubelet
emulator registers it over its unix socket, the health service is asked over TCP."""

from __future__ import annotations

import re
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.healthcheck import READINESS_SERVICE
from simdra._driver.testing.cluster import LocalCluster, PluginProcess, wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
LIVENESS = ""


class Health:
    """The plugin's gRPC health service, asked the way the kubelet's grpc probe asks."""

    def __init__(self, port: int) -> None:
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._stub = health_pb2_grpc.HealthStub(self._channel)

    def status(self, service: str) -> int:
        request = health_pb2.HealthCheckRequest(service=service)
        return int(self._stub.Check(request, timeout=5).status)

    def close(self) -> None:
        self._channel.close()


def start_unregistered(cluster: LocalCluster) -> tuple[PluginProcess, Health]:
    """A plugin process with a health port that the kubelet emulator has not synced yet;
    returns once its health service answers SERVING for liveness."""
    plugin = cluster.start_plugin(num_devices=2, extra=["--healthcheck-port", "0"],
                                  wait=False)
    port = int(wait_until(lambda: re.search(r"gRPC health service on port (\d+)",
                                            plugin.log()), timeout=60,
                          what="health service port").group(1))
    health = Health(port)
    wait_until(lambda: health.status(LIVENESS) == SERVING, what="liveness SERVING")
    return plugin, health


def notify(plugin: PluginProcess, registered: bool, error: str = "") -> None:
    """Send NotifyRegistrationStatus to the plugin, as the kubelet does after GetInfo."""
    assert plugin.registration_socket is not None
    with grpc.insecure_channel(f"unix:{plugin.registration_socket}") as channel:
        stub = regpb_grpc.RegistrationStub(channel)
        status = regpb.RegistrationStatus(plugin_registered=registered, error=error)
        try:
            stub.NotifyRegistrationStatus(status, timeout=5)
        except grpc.RpcError as err:
            # The plugin answers a rejection with an error, so the kubelet logs it too.
            assert not registered, f"registration notice failed: {err}"


@pytest.fixture
def health_clients() -> Iterator[list[Health]]:
    clients: list[Health] = []
    yield clients
    for client in clients:
        client.close()


def test_ready_only_after_the_kubelet_registered_the_plugin(
        cluster: LocalCluster, health_clients: list[Health]) -> None:
    plugin, health = start_unregistered(cluster)
    health_clients.append(health)
    # Slices are published, but no kubelet has registered the plugin yet.
    wait_until(lambda: cluster.complete_pools(), what="slices published")
    assert health.status(READINESS_SERVICE) == NOT_SERVING

    cluster.wait_ready(plugin)  # the emulator registers it (NotifyRegistrationStatus true)

    wait_until(lambda: health.status(READINESS_SERVICE) == SERVING, what="ready")
    assert health.status(LIVENESS) == SERVING


def test_not_ready_until_the_slices_are_published(
        cluster: LocalCluster, health_clients: list[Health]) -> None:
    # Every slice write fails until the test lets them through.
    cluster.api.inject_failure("create", "resourceslices", 503, count=10_000)
    _, health = start_unregistered(cluster)
    health_clients.append(health)
    assert cluster.kubelet is not None
    cluster.kubelet.wait_for_plugin(cluster.driver_name, timeout=60)  # registers it
    wait_until(lambda: cluster.api.writes("resourceslices") >= 2, what="failed slice writes")

    assert health.status(READINESS_SERVICE) == NOT_SERVING
    # Liveness does not depend on the API server.
    assert health.status(LIVENESS) == SERVING

    cluster.api.faults.clear()
    wait_until(lambda: health.status(READINESS_SERVICE) == SERVING, timeout=60,
               what="ready once the slices are published")
    assert cluster.complete_pools()


def test_not_ready_again_when_the_kubelet_reports_a_failed_registration(
        cluster: LocalCluster, health_clients: list[Health]) -> None:
    plugin, health = start_unregistered(cluster)
    health_clients.append(health)
    cluster.wait_ready(plugin)
    wait_until(lambda: health.status(READINESS_SERVICE) == SERVING, what="ready")

    notify(plugin, registered=False, error="endpoint already registered")

    wait_until(lambda: health.status(READINESS_SERVICE) == NOT_SERVING,
               what="not ready after the failed registration")
    assert health.status(LIVENESS) == SERVING  # no restart for a registration problem

    notify(plugin, registered=True)  # the kubelet's retry succeeds

    wait_until(lambda: health.status(READINESS_SERVICE) == SERVING, what="ready again")
