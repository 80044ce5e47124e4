"""Devices that change while the plugin runs: injected faults (simdra fault), inventory
file edits, the health stream the kubelet watches, taints the scheduler sees, and the
gRPC health check the DaemonSet's liveness probe uses."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, wait_until
from simdra._driver.testing.kubelet import KubeletError

TAINT_KEY = "dra.example.com/unhealthy"



def _fault(cluster: LocalCluster, *words: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simdra", "fault", "--plugin-dir", str(cluster.data_dir), *words],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


class HealthWatch:
    """The kubelet emulator's health stream, read in the background."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.messages: list[dict[str, dict[str, Any]]] = []
        assert cluster.kubelet is not None
        kubelet, driver = cluster.kubelet, cluster.driver_name

        def watch() -> None:
            # The stream ends with an error when the test's plugin stops: expected.
            with contextlib.suppress(KubeletError):
                kubelet.watch_health(driver_name=driver, messages=1000, timeout=25,
                                     on_message=lambda m: self.messages.append(
                                         {d["device_name"]: d for d in m}))

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()

    def latest(self) -> dict[str, dict[str, Any]]:
        return self.messages[-1] if self.messages else {}


def _taints(cluster: LocalCluster, device: str) -> list[dict]:
    return cluster.published_devices().get(device, {}).get("taints", [])


def test_injected_unhealthy_device_is_streamed_and_tainted_until_healthy(
        cluster: LocalCluster) -> None:
    cluster.start_plugin(num_devices=4)
    health = HealthWatch(cluster)
    wait_until(lambda: health.latest().get("gpu-3"), what="first health message")
    assert {d["health"] for d in health.latest().values()} == {"Healthy"}
    assert all(d["health_check_timeout_seconds"] > 0 for d in health.latest().values())

    _fault(cluster, "gpu-3", "unhealthy", "--message", "ECC errors")

    wait_until(lambda: health.latest()["gpu-3"]["health"] == "Unhealthy",
               what="unhealthy in stream")
    assert "ECC errors" in health.latest()["gpu-3"]["message"]
    [taint] = wait_until(lambda: _taints(cluster, "gpu-3"), what="taint")
    assert (taint["key"], taint["effect"]) == (TAINT_KEY, "NoSchedule")
    assert _taints(cluster, "gpu-2") == []

    _fault(cluster, "gpu-3", "healthy")

    wait_until(lambda: health.latest()["gpu-3"]["health"] == "Healthy", what="healthy again")
    wait_until(lambda: _taints(cluster, "gpu-3") == [] and "gpu-3" in cluster.published_devices(),
          what="taint removed")


def test_removed_device_is_unpublished_and_comes_back(cluster: LocalCluster) -> None:
    cluster.start_plugin(num_devices=3)

    _fault(cluster, "gpu-1", "remove")
    wait_until(lambda: sorted(cluster.published_devices()) == ["gpu-0", "gpu-2"], what="removal")

    _fault(cluster, "gpu-1", "add")
    wait_until(lambda: sorted(cluster.published_devices()) == ["gpu-0", "gpu-1", "gpu-2"],
          what="device back")


def test_device_vanishing_while_prepared_keeps_claim_and_is_unhealthy(
        cluster: LocalCluster) -> None:
    cluster.start_plugin(num_devices=1)
    cluster.create_claim("held", exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate("held")
    ref = cluster.claim_ref("held")
    assert cluster.prepare("held")[ref.uid]["error"] == ""
    health = HealthWatch(cluster)

    _fault(cluster, "gpu-0", "remove")

    wait_until(lambda: health.latest().get("gpu-0", {}).get("health") == "Unhealthy",
          what="vanished device reported unhealthy")
    assert "disappeared" in health.latest()["gpu-0"]["message"]
    wait_until(lambda: cluster.published_devices() == {}, what="device unpublished")
    assert cluster.unprepare(ref) == {ref.uid: {"error": ""}}
    assert list(cluster.cdi_root.glob(f"*{ref.uid}*")) == []


def test_failing_and_slow_prepares_are_injected_per_device(cluster: LocalCluster) -> None:
    cluster.start_plugin(num_devices=1)
    cluster.create_claim("flaky", exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate("flaky")
    ref = cluster.claim_ref("flaky")
    _fault(cluster, "gpu-0", "fail-prepare", "--count", "1", "--message", "driver hang")

    failed = cluster.prepare("flaky")[ref.uid]
    assert "gpu-0" in failed["error"] and "driver hang" in failed["error"]
    assert list(cluster.cdi_root.glob(f"*{ref.uid}*")) == []

    _fault(cluster, "gpu-0", "slow-prepare", "--count", "1", "--seconds", "0.5")
    start = time.monotonic()
    assert cluster.prepare("flaky")[ref.uid]["error"] == ""
    assert time.monotonic() - start >= 0.5


def test_inventory_file_edits_are_republished(cluster: LocalCluster) -> None:
    inventory = cluster.workdir / "inventory.yaml"

    def write(names: list[str]) -> None:
        devices = [{"name": n, "attributes": {"type": {"string": "gpu"}}} for n in names]
        inventory.write_text(yaml.safe_dump({"pools": [{"name": "edge", "devices": devices}]}))

    write(["a-0", "a-1"])
    cluster.start_plugin(profile=str(inventory))

    write(["a-0", "a-2", "a-3"])  # one removed, two added
    wait_until(lambda: sorted(cluster.published_devices()) == ["a-0", "a-2", "a-3"],
          what="edited inventory published")
    [item] = cluster.complete_pools()["edge"]
    assert item["spec"]["pool"]["resourceSliceCount"] == 1

    inventory.write_text("pools: [ {name: edge, devices: [ {name: Bad_Name} ] } ]")
    time.sleep(1.5)  # a bad edit keeps the last good inventory published
    assert sorted(cluster.published_devices()) == ["a-0", "a-2", "a-3"]


def _logged_port(cluster: LocalCluster, plugin: Any, what: str) -> int:
    match = wait_until(lambda: re.search(rf"{what} on port (\d+)", plugin.log()), what=what)
    return int(match.group(1))


def test_grpc_health_check_fails_when_a_socket_is_gone(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=1, extra=["--healthcheck-port", "0"])
    port = _logged_port(cluster, plugin, "gRPC health service")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        def status() -> int:
            return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status

        assert status() == health_pb2.HealthCheckResponse.SERVING
        (cluster.data_dir / "dra.sock").unlink()
        wait_until(lambda: status() == health_pb2.HealthCheckResponse.NOT_SERVING,
              what="NOT_SERVING after the DRA socket vanished")
