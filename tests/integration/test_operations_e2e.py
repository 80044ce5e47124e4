"""What an operator sees of a running plugin: Prometheus metrics, JSON logs with the
claim on every line, claim status.devices, and `simdra usage`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster, PluginProcess, wait_until


def _nic_claim(cluster: LocalCluster, name: str, bandwidth: str = "1G") -> None:
    cluster.create_claim(name, exactly("net", "nic.dra.example.com",
                                       capacity={"requests": {"bandwidth": bandwidth}}))
    cluster.allocate(name)


def _scrape(plugin: PluginProcess) -> dict[tuple[str, tuple], float]:
    port = int(wait_until(lambda: re.search(r"metrics on port (\d+)", plugin.log()),
                     what="metrics port").group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_show_a_prepare_and_consumed_capacity(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(profile="nic", num_devices=1,
                                  extra=["--metrics-port", "0"])
    _nic_claim(cluster, "metered", "2G")
    ref = cluster.claim_ref("metered")
    assert cluster.prepare("metered")[ref.uid]["error"] == ""

    samples = _scrape(plugin)

    assert samples[("simdra_prepare_total", (("result", "success"),))] == 1
    assert samples[("simdra_prepare_seconds_count", ())] == 1
    assert samples[("simdra_prepared_claims", ())] == 1
    device = (("capacity", "bandwidth"), ("device", "nic-0"), ("pool", cluster.node_name))
    assert samples[("simdra_device_capacity_consumed", device)] == 2e9
    assert samples[("simdra_device_capacity", device)] == 10e9
    assert samples[("simdra_device_healthy", (("device", "nic-0"),
                                               ("pool", cluster.node_name)))] == 1
    assert samples[("simdra_pool_generation", (("pool", cluster.node_name),))] >= 1


def test_json_logs_carry_the_claim_on_every_line_about_it(cluster: LocalCluster) -> None:
    plugin = cluster.start_plugin(profile="nic", num_devices=1,
                                  extra=["--log-format", "json", "-v", "1"])
    _nic_claim(cluster, "logged")
    ref = cluster.claim_ref("logged")
    cluster.prepare("logged")

    lines = [json.loads(line) for line in plugin.log().splitlines() if line.startswith("{")]

    about = [entry for entry in lines if "prepared claim" in entry["msg"]]
    assert about and all(entry["claim_uid"] == ref.uid for entry in about)
    assert all({"ts", "level", "logger", "msg"} <= set(entry) for entry in lines)


def test_claim_status_devices_written_on_prepare_and_removed_on_unprepare(
        cluster: LocalCluster) -> None:
    cluster.start_plugin(profile="nic", num_devices=1, extra=["--claim-status", "true"])
    _nic_claim(cluster, "reported")
    ref = cluster.claim_ref("reported")
    share_id = cluster.prepare("reported")[ref.uid]["devices"][0]["share_id"]

    def status_devices() -> list[dict]:
        claim = cluster.api.get_object("resourceclaims", "reported", "default") or {}
        return claim.get("status", {}).get("devices", [])

    [entry] = wait_until(status_devices, what="status.devices")
    assert (entry["driver"], entry["device"], entry["shareID"]) == (
        cluster.driver_name, "nic-0", share_id)
    [ready] = [c for c in entry["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "True"
    assert entry["networkData"]["interfaceName"]

    cluster.unprepare(ref)

    wait_until(lambda: status_devices() == [], what="status.devices removed")


def test_usage_reads_a_running_plugins_state(cluster: LocalCluster) -> None:
    cluster.start_plugin(profile="nic", num_devices=1)
    for name in ("u-1", "u-2"):
        _nic_claim(cluster, name, "3G")
    cluster.prepare("u-1", "u-2")

    result = subprocess.run(
        [sys.executable, "-m", "simdra", "usage", "--plugin-dir", str(cluster.data_dir),
         "--output", "json"], capture_output=True, text=True, timeout=60, check=False)

    assert result.returncode == 0, result.stderr
    [device] = json.loads(result.stdout)["devices"]
    assert (device["device"], device["mode"]) == ("nic-0", "shared")
    assert (device["capacity"], device["used"], device["free"]) == (
        {"bandwidth": "10G"}, {"bandwidth": "6G"}, {"bandwidth": "4G"})
    assert sorted(h["claim"]["uid"] for h in device["holders"]) == sorted(
        cluster.claim_ref(n).uid for n in ("u-1", "u-2"))
