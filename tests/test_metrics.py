"""The metrics endpoint as Prometheus sees it: real HTTP scrapes of a real preparer,
publisher and inventory, parsed with prometheus_client's own exposition parser."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simdra._driver.atomicfile import SYNC_THREAD_PREFIX
from simdra._driver.claims.reconcile.plan import CLAIM_DELETED, GONE, READ_RESULTS, REASONS
from simdra._driver.claims.reconcile.reconciler import IN_USE, KEPT_WHY
from simdra._driver.claims.types import ClaimRef, PrepareResult, UnprepareResult
from simdra._driver.core.quantity import parse_quantity
from simdra._driver.kubelet.health import DeviceHealth, HealthStatus
from simdra._driver.observability.metrics import InstrumentedPreparer, PluginMetrics
from simdra._driver.observability.server import MetricsServer, start_metrics_server
from simdra._driver.observability.state import StateCollector
from simdra._driver.slices.publisher import Publisher
from simdra._driver.testing.apiserver import APIServer
from tests.claims.builders import (
    DRIVER,
    NODE,
    ProfileCluster,
    claim,
    request,
    result,
    wants,
    with_profile,
)

BAD_UID = "99999999-9999-4999-8999-999999999999"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """GET /metrics over HTTP; sample (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start metrics servers on ephemeral ports; all stopped, threads joined, at the end."""
    started: list[MetricsServer] = []
    before = set(threading.enumerate())

    def _serve(metrics: PluginMetrics) -> int:
        server, port = start_metrics_server(metrics.registry, 0, addr="127.0.0.1")
        started.append(server)
        return port

    yield _serve
    for server in started:
        server.stop()
    # A prepare may start the process-wide fsync pool, which lives on by design.
    leftover = [t.name for t in set(threading.enumerate()) - before
                if t.is_alive() and not t.name.startswith(SYNC_THREAD_PREFIX)]
    assert leftover == [], "metrics server threads outlived stop()"


def test_prepare_batch_counts_each_claim_and_times_the_call(tmp_path, serve):
    cluster = ProfileCluster("gpu,nic")
    gpu = cluster.allocate("trainer", request("gpu", "gpu"))
    share = cluster.allocate("web", wants("net", "nic", bandwidth="4G"))
    bad = cluster.put(claim(BAD_UID, [result("gpu", "gpu-99", pool=NODE)], name="ghost"))
    metrics = PluginMetrics()
    preparer = cluster.preparer(tmp_path)
    instrumented = InstrumentedPreparer(preparer, metrics)
    metrics.registry.register(
        StateCollector(prepared=preparer.prepared, inventory=lambda: cluster.inventory)
    )
    port = serve(metrics)

    answers = instrumented.prepare([gpu, share, bad])

    assert answers[BAD_UID].error and not answers[gpu.uid].error and not answers[share.uid].error
    samples = scrape(port)
    assert value(samples, "simdra_prepare_seconds_count") == 1
    assert value(samples, "simdra_prepare_total", result="success") == 2
    assert value(samples, "simdra_prepare_total", result="error") == 1
    assert value(samples, "simdra_unprepare_total", result="success") == 0
    assert value(samples, "simdra_prepared_claims") == 2

    assert instrumented.unprepare([share, bad]) == {
        share.uid: UnprepareResult(), BAD_UID: UnprepareResult()
    }
    samples = scrape(port)
    assert value(samples, "simdra_unprepare_seconds_count") == 1
    assert value(samples, "simdra_unprepare_total", result="success") == 2
    assert value(samples, "simdra_prepared_claims") == 1


def test_consumed_capacity_of_shared_exclusive_and_idle_devices(tmp_path, serve):
    cluster = ProfileCluster("gpu,nic", count=2)
    refs = [
        cluster.allocate("web", wants("net", "nic", bandwidth="4G")),
        cluster.allocate("db", wants("net", "nic", bandwidth="1500M"), request("gpu", "gpu")),
        cluster.allocate("watch", request("gpu", "gpu", adminAccess=True), namespace="ops"),
    ]
    preparer = cluster.preparer(tmp_path)
    assert not any(a.error for a in preparer.prepare(refs).values())
    metrics = PluginMetrics()
    metrics.registry.register(
        StateCollector(prepared=preparer.prepared, inventory=lambda: cluster.inventory)
    )
    samples = scrape(serve(metrics))

    shares: dict[str, float] = {"nic-0": 0.0, "nic-1": 0.0}
    for ref in refs[:2]:
        for r in cluster.results(ref):
            if r["device"].startswith("nic"):
                shares[r["device"]] += float(parse_quantity(r["consumedCapacity"]["bandwidth"]))
    assert sum(shares.values()) == 5.5e9
    for nic, used in shares.items():
        labels = {"pool": NODE, "device": nic, "capacity": "bandwidth"}
        assert value(samples, "simdra_device_capacity", **labels) == 10e9
        assert value(samples, "simdra_device_capacity_consumed", **labels) == used
    # An exclusive device is used up by its one claim; admin access consumes nothing.
    (held,) = {r["device"] for r in cluster.results(refs[1]) if r["device"].startswith("gpu")}
    (idle,) = {"gpu-0", "gpu-1"} - {held}
    gpu = {"pool": NODE, "capacity": "memory"}
    memory = float(parse_quantity("80Gi"))
    assert value(samples, "simdra_device_capacity_consumed", device=held, **gpu) == memory
    assert value(samples, "simdra_device_capacity_consumed", device=idle, **gpu) == 0
    on_idle = sum(r["device"] == idle for ref in refs for r in cluster.results(ref))
    assert value(samples, "simdra_device_prepared_units", pool=NODE, device=idle) == on_idle


def test_partition_consumes_its_gpus_shared_counters(tmp_path, serve):
    cluster = ProfileCluster("gpu-partitioned")
    small = cluster.allocate("small", with_profile("gpu", "2g.20gb"))
    preparer = cluster.preparer(tmp_path)
    assert not preparer.prepare([small])[small.uid].error
    metrics = PluginMetrics()
    metrics.registry.register(
        StateCollector(prepared=preparer.prepared, inventory=lambda: cluster.inventory)
    )
    samples = scrape(serve(metrics))

    slices = {"pool": NODE, "counter_set": "gpu-0-counters", "counter": "slices"}
    assert value(samples, "simdra_pool_counter", **slices) == 7
    assert value(samples, "simdra_pool_counter_consumed", **slices) == 2


def test_publisher_writes_generations_and_device_health(serve):
    cluster = ProfileCluster("gpu,nic", count=2)
    health = [
        DeviceHealth(NODE, "gpu-0", HealthStatus.HEALTHY),
        DeviceHealth(NODE, "gpu-1", HealthStatus.UNHEALTHY),
        DeviceHealth(NODE, "nic-0", HealthStatus.UNKNOWN),
    ]
    with APIServer() as api:
        api.put_object("nodes", {"metadata": {"name": NODE}})
        client = api.rest_client()
        try:
            with Publisher(client, DRIVER, NODE, cluster.inventory) as publisher:
                assert publisher.wait_synced(timeout=10)
                metrics = PluginMetrics()
                metrics.registry.register(StateCollector(
                    inventory=lambda: cluster.inventory,
                    publisher_stats=publisher.stats,
                    health=lambda: health,
                ))
                samples = scrape(serve(metrics))
        finally:
            client.close()

    slices = value(samples, "simdra_pool_slices", pool=NODE)
    assert slices >= 1
    assert value(samples, "simdra_api_writes_total", verb="create") == slices
    assert value(samples, "simdra_pool_generation", pool=NODE) >= 1
    assert value(samples, "simdra_publisher_synced") == 1
    assert value(samples, "simdra_pool_devices", pool=NODE) == 4
    assert value(samples, "simdra_device_healthy", pool=NODE, device="gpu-0") == 1
    assert value(samples, "simdra_device_healthy", pool=NODE, device="gpu-1") == 0
    assert value(samples, "simdra_device_healthy", pool=NODE, device="nic-0") == 0


def test_failing_or_missing_provider_leaves_the_rest_of_the_scrape(tmp_path, serve):
    cluster = ProfileCluster("gpu")

    def broken() -> Any:
        raise RuntimeError("publisher not reachable")

    metrics = PluginMetrics()
    metrics.registry.register(StateCollector(
        prepared=cluster.preparer(tmp_path).prepared,
        inventory=lambda: cluster.inventory,
        publisher_stats=broken,
        health=lambda: None,  # not there yet
    ))
    port = serve(metrics)
    scrape(port)
    samples = scrape(port)

    assert value(samples, "simdra_metrics_collect_errors_total", section="publisher") == 2
    assert value(samples, "simdra_prepared_claims") == 0
    assert value(samples, "simdra_pool_devices", pool=NODE) == 1
    assert not names(samples) & {"simdra_api_writes_total", "simdra_device_healthy"}


class _Exploding:
    """A preparer that breaks the protocol by raising."""

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        raise OSError("disk gone")

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        return {}  # answers nothing: the kubelet sees errors


def test_raising_or_silent_preparer_counts_errors(serve):
    metrics = PluginMetrics()
    instrumented = InstrumentedPreparer(_Exploding(), metrics)
    refs = [ClaimRef("default", "a", "uid-a"), ClaimRef("default", "b", "uid-b")]

    with pytest.raises(OSError, match="disk gone"):
        instrumented.prepare(refs)
    instrumented.unprepare(refs)

    samples = scrape(serve(metrics))
    assert value(samples, "simdra_prepare_total", result="error") == 2
    assert value(samples, "simdra_prepare_seconds_count") == 1
    assert value(samples, "simdra_unprepare_total", result="error") == 2


def test_registries_are_independent_and_stop_frees_the_port(serve):
    first, second = PluginMetrics(), PluginMetrics()  # no duplicate-timeseries clash
    InstrumentedPreparer(_Exploding(), first).unprepare([ClaimRef("d", "a", "uid-a")])
    assert value(scrape(serve(second)), "simdra_unprepare_total", result="error") == 0

    server, port = start_metrics_server(first.registry, 0, addr="127.0.0.1")
    assert value(scrape(port), "simdra_unprepare_total", result="error") == 1
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        scrape(port)


def test_reconciled_claims_count_by_reason_and_start_at_zero(serve):
    metrics = PluginMetrics()
    port = serve(metrics)
    samples = scrape(port)
    for reason in REASONS:
        assert value(samples, "simdra_reconciled_claims_total", reason=reason) == 0
    metrics.reconciled(ClaimRef("default", "a", "uid-a"), CLAIM_DELETED)
    assert value(scrape(port), "simdra_reconciled_claims_total", reason=CLAIM_DELETED) == 1


def test_reconcile_reads_count_by_result_and_start_at_zero(serve):
    metrics = PluginMetrics()
    port = serve(metrics)
    for outcome in READ_RESULTS:
        assert value(scrape(port), "simdra_reconcile_claim_reads_total", result=outcome) == 0
    metrics.reconcile_read(GONE)
    metrics.reconcile_read(GONE)
    assert value(scrape(port), "simdra_reconcile_claim_reads_total", result=GONE) == 2


def test_reconcile_reports_count_kept_claims_brakes_and_leaked_records(serve):
    metrics = PluginMetrics()
    port = serve(metrics)
    for why in KEPT_WHY:
        assert value(scrape(port), "simdra_reconcile_kept_claims_total", why=why) == 0
    reports = metrics.reconcile_reports()
    assert reports.kept is not None and reports.braked and reports.leaked and reports.freed
    reports.kept(ClaimRef("default", "a", "uid-a"), CLAIM_DELETED, IN_USE)
    reports.braked(12)
    reports.braked(12)
    reports.leaked(12)
    reports.leaked(3)
    samples = scrape(port)
    assert value(samples, "simdra_reconcile_kept_claims_total", why=IN_USE) == 1
    assert value(samples, "simdra_reconcile_brakes_total") == 2
    assert value(samples, "simdra_reconcile_leaked_claims") == 3
