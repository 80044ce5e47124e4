"""simdra_kubelet_calls_total: every call the kubelet makes on the plugin's sockets,
counted from the first one on (before the metrics exist), by service, method and code,
as a scrape of the metrics registry shows it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from simdra._driver.claims.types import ClaimRef
from simdra._driver.kubelet.early import EarlyKubelet, serve_kubelet_early
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2 as regpb
from simdra._driver.kubelet.gen import pluginregistration_v1_pb2_grpc as regpb_grpc
from simdra._driver.kubelet.healthcheck import probe_unix_socket
from simdra._driver.observability.metrics import PluginMetrics
from simdra._driver.testing.kubelet import KubeletEmulator

from .fakes import DRIVER, Dirs, FakePreparer

CLAIM = ClaimRef("default", "c1", "uid-1")
REGISTRATION = "pluginregistration.Registration"
Key = tuple[str, str, str]


@pytest.fixture
def early(dirs: Dirs) -> Iterator[EarlyKubelet]:
    served = serve_kubelet_early(DRIVER, Path(dirs.data), dirs.dra_socket,
                                 dirs.registration_socket, count_calls=True)
    yield served
    served.kubelet.stop(grace=0)


def _scrape(early: EarlyKubelet) -> dict[Key, float]:
    """simdra_kubelet_calls_total as a scrape of a fresh metrics registry shows it."""
    assert early.calls is not None
    metrics = PluginMetrics()
    metrics.add_kubelet_calls(early.calls)
    text = generate_latest(metrics.registry).decode()
    return {(s.labels["service"], s.labels["method"], s.labels["code"]): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "simdra_kubelet_calls_total"}


def _wait_for_count(early: EarlyKubelet, key: Key) -> dict[Key, float]:
    """Scrape until `key` shows (a call is counted when the server is done with it,
    which the client may see first); the deadline only bounds a failure."""
    deadline = time.monotonic() + 10
    while True:
        samples = _scrape(early)
        if samples.get(key) or time.monotonic() > deadline:
            return samples
        time.sleep(0.02)


def test_calls_are_counted_by_service_method_and_code_from_the_first_one(
    early: EarlyKubelet, kubelet: KubeletEmulator, preparer: FakePreparer
) -> None:
    kubelet.wait_for_plugin(DRIVER, timeout=5)
    early.preparer.set(preparer)
    kubelet.prepare([CLAIM], driver_name=DRIVER, version="v1")
    kubelet.unprepare([CLAIM], driver_name=DRIVER, version="v1beta1")

    # The metrics are made only now, after the calls, as `simdra run` makes them after
    # the kubelet's sockets serve.
    samples = _wait_for_count(early, ("v1beta1.DRAPlugin", "NodeUnprepareResources", "OK"))

    assert samples == {
        (REGISTRATION, "GetInfo", "OK"): 1,
        (REGISTRATION, "NotifyRegistrationStatus", "OK"): 1,
        ("v1.DRAPlugin", "NodePrepareResources", "OK"): 1,
        ("v1.DRAPlugin", "NodeUnprepareResources", "OK"): 0,  # present before a call
        ("v1beta1.DRAPlugin", "NodePrepareResources", "OK"): 0,
        ("v1beta1.DRAPlugin", "NodeUnprepareResources", "OK"): 1,
    }


def test_the_dra_methods_show_at_zero_before_any_call(early: EarlyKubelet) -> None:
    assert _scrape(early) == {
        (version, method, "OK"): 0
        for version in ("v1.DRAPlugin", "v1beta1.DRAPlugin")
        for method in ("NodePrepareResources", "NodeUnprepareResources")
    }


def test_a_rejected_registration_counts_with_the_code_the_kubelet_got(
    early: EarlyKubelet, dirs: Dirs
) -> None:
    with grpc.insecure_channel(f"unix:{dirs.registration_socket}") as channel:
        stub = regpb_grpc.RegistrationStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.NotifyRegistrationStatus(
                regpb.RegistrationStatus(plugin_registered=False, error="no"), timeout=10)

    assert raised.value.code() == grpc.StatusCode.UNKNOWN
    key = (REGISTRATION, "NotifyRegistrationStatus", "UNKNOWN")
    assert _wait_for_count(early, key)[key] == 1


def test_a_health_stream_the_kubelet_closes_counts_as_cancelled(
    early: EarlyKubelet, kubelet: KubeletEmulator
) -> None:
    kubelet.wait_for_plugin(DRIVER, timeout=5)

    assert len(kubelet.watch_health(driver_name=DRIVER, version="v1", messages=1)) == 1

    key = ("v1.DRAResourceHealth", "NodeWatchResources", "CANCELLED")
    samples = _wait_for_count(early, key)
    assert samples[key] == 1
    assert ("v1.DRAResourceHealth", "NodeWatchResources", "OK") not in samples


def test_a_method_the_plugin_does_not_serve_counts_under_unknown(
    early: EarlyKubelet, dirs: Dirs
) -> None:
    with grpc.insecure_channel(f"unix:{dirs.dra_socket}") as channel:
        call = channel.unary_unary("/example.Nope/Call")
        with pytest.raises(grpc.RpcError) as raised:
            call(b"", timeout=10)

    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    key = ("unknown", "unknown", "UNIMPLEMENTED")
    assert _wait_for_count(early, key)[key] == 1


def test_the_plugins_own_liveness_probe_of_its_sockets_is_no_kubelet_call(
    early: EarlyKubelet, dirs: Dirs
) -> None:
    assert probe_unix_socket(dirs.dra_socket, 10)
    assert probe_unix_socket(dirs.registration_socket, 10)
    # A call counted after the probes: once it shows, the probes would have too.
    with grpc.insecure_channel(f"unix:{dirs.dra_socket}") as channel, \
            pytest.raises(grpc.RpcError):
        channel.unary_unary("/example.Nope/Call")(b"", timeout=10)

    key = ("unknown", "unknown", "UNIMPLEMENTED")
    assert _wait_for_count(early, key)[key] == 1


def test_without_metrics_nothing_is_counted(dirs: Dirs, kubelet: KubeletEmulator) -> None:
    served = serve_kubelet_early(DRIVER, Path(dirs.data), dirs.dra_socket,
                                 dirs.registration_socket)
    try:
        kubelet.wait_for_plugin(DRIVER, timeout=5)
        assert served.calls is None
    finally:
        served.kubelet.stop(grace=0)
