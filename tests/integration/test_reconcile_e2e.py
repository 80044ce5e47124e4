"""Reconciliation end to end: the kubelet (emulator) never unprepares two claims whose
pods are gone (it lost its state); the plugin process finds them leaked in the API
stand-in and unprepares them, and their devices serve new claims."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from driver.testing.allocation.builders import exactly
from driver.testing.cluster import LocalCluster, PluginProcess, wait_until

GRACE_S = 5  # long enough that the first prepares below surely meet the leaked records


def _claim(cluster: LocalCluster, name: str) -> str:
    cluster.create_claim(name, exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate(name)
    return cluster.claim_ref(name).uid


def _counts(plugin: PluginProcess, name: str, label: str) -> dict[str, float]:
    port = int(wait_until(lambda: re.search(r"metrics on port (\d+)", plugin.log()),
                          what="metrics port").group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {s.labels[label]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def test_leaked_claims_are_unprepared_and_their_devices_serve_new_claims(
        cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=2, extra=[
        "--reconcile-interval", "0.5", "--reconcile-grace", str(GRACE_S),
        "--metrics-port", "0"])
    gone, reborn = _claim(cluster, "gone"), _claim(cluster, "reborn")
    answers = cluster.prepare("gone", "reborn")
    assert answers[gone]["error"] == answers[reborn]["error"] == ""
    # The pods are deleted while the kubelet has lost its state: nobody will unprepare.
    for name in ("gone", "reborn"):
        cluster.resource.delete_namespaced_resource_claim(name, "default")
    fresh, reborn_again = _claim(cluster, "fresh"), _claim(cluster, "reborn")

    blocked = cluster.prepare("fresh", "reborn")
    assert all("exclusive and already prepared" in blocked[uid]["error"]
               for uid in (fresh, reborn_again)), blocked

    def prepared() -> bool:
        answers = cluster.prepare("fresh", "reborn")
        return all(answers[uid]["error"] == "" for uid in (fresh, reborn_again))

    wait_until(prepared, timeout=GRACE_S + 30, what="the new claims to prepare")
    counts = _counts(plugin, "simdra_reconciled_claims_total", "reason")
    assert (counts["claim_deleted"], counts["uid_changed"], counts["not_reserved"]) == (1, 1, 0)
    reads = _counts(plugin, "simdra_reconcile_claim_reads_total", "result")
    assert reads["gone"] >= 2 and reads["found"] >= 2 and reads["failed"] == 0, reads
    lines = [line for line in plugin.log().splitlines() if "reconcile: unprepared" in line]
    assert len(lines) == 2
    assert any(gone in line and "default/gone" in line and "claim_deleted" in line
               for line in lines)
    assert any(reborn in line and "default/reborn" in line and "uid_changed" in line
               for line in lines)
    assert sorted(p.name for p in cluster.cdi_root.iterdir()) == sorted(
        f"k8s.dra.example.com-device_{uid}.json" for uid in (fresh, reborn_again))
