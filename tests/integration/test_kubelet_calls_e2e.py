"""simdra_kubelet_calls_total of a running `simdra run`: what an operator (or the
cluster e2e) reads to see that the kubelet called the plugin, e.g. prepared a claim
again after the kubelet restarted."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, PluginProcess, wait_until
from simdra._driver.testing.kubelet import KubeletEmulator

REGISTRATION = "pluginregistration.Registration"


def _kubelet_calls(plugin: PluginProcess) -> dict[tuple[str, str, str], float]:
    port = int(wait_until(lambda: re.search(r"metrics on port (\d+)", plugin.log()),
                          what="metrics port").group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.labels["service"], s.labels["method"], s.labels["code"]): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "simdra_kubelet_calls_total"}


def test_calls_are_counted_again_after_the_kubelet_restarts(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(num_devices=1, extra=["--metrics-port", "0"])
    cluster.create_claim("c1", exactly("gpu", "gpu.dra.example.com"))
    cluster.allocate("c1")
    assert cluster.prepare("c1")[cluster.claim_ref("c1").uid]["error"] == ""
    before = _kubelet_calls(plugin)

    # A restarted kubelet registers the plugin again and prepares its claims again.
    assert cluster.kubelet is not None
    cluster.kubelet.close()
    cluster.kubelet = KubeletEmulator(str(cluster.registrar_dir))
    cluster.kubelet.wait_for_plugin(cluster.driver_name)
    assert cluster.prepare("c1")[cluster.claim_ref("c1").uid]["error"] == ""
    after = _kubelet_calls(plugin)

    prepare = ("v1.DRAPlugin", "NodePrepareResources", "OK")
    assert (before[prepare], after[prepare]) == (1, 2)
    get_info = (REGISTRATION, "GetInfo", "OK")
    assert after[get_info] == before[get_info] + 1
    assert after[("v1beta1.DRAPlugin", "NodePrepareResources", "OK")] == 0
