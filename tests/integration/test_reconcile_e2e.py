"""Reconciliation end to end, at its shortest allowed settings: the kubelet (emulator)
never unprepares two claims whose API objects are gone (it lost its state). With
--reconcile-mode=free the plugin process frees the one no pod uses any more, as the
kubelet's PodResources API (a real socket) says, and its device serves a new claim; it
keeps the one whose pod still runs, with its device, and counts and logs why."""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, PluginProcess, wait_until
from simdra._driver.testing.pod_resources import ClaimUse, PodClaims

GRACE_S = 30  # the shortest --reconcile-grace accepted
INTERVAL_S = 2


def _claim(cluster: LocalCluster, name: str) -> str:
    cluster.create_claim(name, exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate(name)
    return cluster.claim_ref(name).uid


def _device(cluster: LocalCluster, name: str) -> str:
    [result] = cluster.allocate(name)["status"]["allocation"]["devices"]["results"]
    return str(result["device"])


def _counts(plugin: PluginProcess, name: str, label: str) -> dict[str, float]:
    port = int(wait_until(lambda: re.search(r"metrics on port (\d+)", plugin.log()),
                          what="metrics port").group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {s.labels[label]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


@pytest.mark.slow  # waits out the shortest grace, 30 s
def test_leaked_claims_are_freed_only_when_the_kubelet_agrees(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=2, extra=[
        "--reconcile-interval", str(INTERVAL_S), "--reconcile-grace", str(GRACE_S),
        "--reconcile-mode", "free", "--metrics-port", "0"])
    gone, held = _claim(cluster, "gone"), _claim(cluster, "held")
    answers = cluster.prepare("gone", "held")
    assert answers[gone]["error"] == answers[held]["error"] == ""
    devices = {claim: answers[uid]["devices"][0] for claim, uid in
               (("gone", gone), ("held", held))}
    # "held"'s pod still runs on the node (its kubelet was cut off when the pod was
    # force-deleted); "gone"'s does not. Both claims vanish from the API server.
    assert cluster.pod_resources is not None
    device = devices["held"]
    cluster.pod_resources.set_pods([PodClaims("default", "pod-held", [ClaimUse(
        "default", "held", [(cluster.driver_name, device["pool_name"],
                             device["device_name"], None)])])])
    for name in ("gone", "held"):
        cluster.resource.delete_namespaced_resource_claim(name, "default")
    first, other = _claim(cluster, "first"), _claim(cluster, "other")
    # Name them by the device each got: "fresh" the freed one's, "second" the held one's.
    on_gone = _device(cluster, "first") == devices["gone"]["device_name"]
    (fresh, fresh_name), (second, second_name) = (
        ((first, "first"), (other, "other")) if on_gone else ((other, "other"), (first, "first")))
    blocked = cluster.prepare("first", "other")
    assert all("exclusive and already prepared" in blocked[uid]["error"]
               for uid in (fresh, second)), blocked

    wait_until(lambda: cluster.prepare(fresh_name)[fresh]["error"] == "",
               timeout=GRACE_S + 30, what="the freed device to serve a new claim")
    wait_until(lambda: _counts(plugin, "simdra_reconcile_kept_claims_total", "why")["in_use"]
               == 1, timeout=3 * INTERVAL_S + 10, what="the held claim to be counted kept")
    assert "exclusive and already prepared" in cluster.prepare(second_name)[second]["error"]
    counts = _counts(plugin, "simdra_reconciled_claims_total", "reason")
    assert counts["claim_deleted"] == 1 and sum(counts.values()) == 1, counts
    kept = _counts(plugin, "simdra_reconcile_kept_claims_total", "why")
    assert kept == {"in_use": 1, "kubelet_unknown": 0, "report_only": 0}, kept
    reads = _counts(plugin, "simdra_reconcile_claim_reads_total", "result")
    assert reads["gone"] >= 2 and reads["failed"] == 0, reads
    log = plugin.log().splitlines()
    [freed] = [line for line in log if "reconcile: unprepared" in line]
    assert gone in freed and "default/gone" in freed and "claim_deleted" in freed
    [kept_line] = [line for line in log if "reconcile: kept" in line]
    assert held in kept_line and "still uses it" in kept_line
    specs = sorted(p.name for p in cluster.cdi_root.iterdir())
    assert specs == sorted(f"k8s.dra.example.com-device_{uid}.json" for uid in (held, fresh))


@pytest.mark.slow  # waits out the shortest grace, 30 s
def test_report_mode_is_the_default_and_frees_nothing(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=1, extra=[
        "--reconcile-interval", str(INTERVAL_S), "--reconcile-grace", str(GRACE_S),
        "--metrics-port", "0"])
    gone = _claim(cluster, "gone")
    assert cluster.prepare("gone")[gone]["error"] == ""
    cluster.resource.delete_namespaced_resource_claim("gone", "default")
    wait_until(lambda: _counts(plugin, "simdra_reconcile_kept_claims_total", "why")
               ["report_only"] == 1, timeout=GRACE_S + 30, what="the leak to be reported")
    assert _counts(plugin, "simdra_reconciled_claims_total", "reason")["claim_deleted"] == 0
    assert [p.name for p in cluster.cdi_root.iterdir()] == [
        f"k8s.dra.example.com-device_{gone}.json"]
    assert cluster.pod_resources is not None and cluster.pod_resources.calls == 0
