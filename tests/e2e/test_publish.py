"""Our plugin publishing to the real kube-apiserver: every write accepted, complete pools,
generations as promised, and a quiet node makes no writes."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from simdra._driver.testing.cluster import wait_until

from . import releases
from .controlplane import ControlPlane
from .hostnode import DRIVER, HostNode

JSON = dict[str, Any]


def _writes(node: HostNode) -> float:
    return sum(v for k, v in node.metrics().items() if k.startswith("simdra_api_writes_total"))


def _errors(node: HostNode) -> dict[str, float]:
    return {k: v for k, v in node.metrics().items()
            if k.startswith("simdra_publish_errors_total") and v}


def test_every_write_accepted_and_pools_complete(gpu_node: HostNode) -> None:
    pools = gpu_node.pools_complete()
    assert list(pools) == [gpu_node.name]
    devices = {d["name"] for s in pools[gpu_node.name] for d in s["spec"].get("devices", [])}
    assert devices == {"gpu-0", "gpu-1", "nic-0", "nic-1"}
    for item in pools[gpu_node.name]:
        owner = item["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner.get("controller")) == (
            "Node", gpu_node.name, True)
    assert _errors(gpu_node) == {}, "the real API server refused writes"


def test_partitionable_pool_accepted(mig_node: HostNode, control_plane: ControlPlane) -> None:
    """A partitionable GPU's pool is accepted by the real server in the layout its release
    wants: the counter set in a slice of its own (1.35+) or with the devices that consume
    it (1.34)."""
    pools = mig_node.pools_complete()
    slices = pools[mig_node.name]
    counters = [s for s in slices if s["spec"].get("sharedCounters")]
    assert len(counters) == 1
    with_counters = {d["name"] for d in counters[0]["spec"].get("devices") or []}
    if releases.counters_with_devices(control_plane):
        assert {"gpu-0", "gpu-0-3g-0"} <= with_counters
    else:
        assert not with_counters
    names = {d["name"] for s in slices for d in s["spec"].get("devices", [])}
    assert "gpu-0" in names and "gpu-0-3g-0" in names and len(names) == 1 + 7 + 3 + 2
    # The real server keeps consumesCounters: the gate is on and our shape is valid.
    whole = next(d for s in slices for d in s["spec"].get("devices", [])
                 if d["name"] == "gpu-0")
    assert whole["consumesCounters"][0]["counterSet"] == "gpu-0-counters"
    assert _errors(mig_node) == {}


def test_quiet_node_makes_no_writes(gpu_node: HostNode) -> None:
    before = {s["metadata"]["name"]: s["metadata"]["resourceVersion"]
              for s in gpu_node.slices()}
    writes = _writes(gpu_node)
    time.sleep(5)  # five rescans at --rescan-interval 1
    after = {s["metadata"]["name"]: s["metadata"]["resourceVersion"]
             for s in gpu_node.slices()}
    assert after == before
    assert _writes(gpu_node) == writes


def _fault(node: HostNode, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "simdra", "fault", "--plugin-dir",
                    str(node.plugins / DRIVER), *args], check=True, capture_output=True)


def test_one_slice_change_keeps_the_generation(gpu_node: HostNode) -> None:
    """The helper's rule: with no new slice and at most one slice to update, the pool
    keeps its generation and the slice is updated in place."""
    (before,) = gpu_node.pools_complete()[gpu_node.name]
    _fault(gpu_node, "nic-1", "remove")
    try:
        def without_nic1() -> JSON | None:
            items = gpu_node.pools_complete().get(gpu_node.name, [])
            names = {d["name"] for s in items for d in s["spec"].get("devices", [])}
            return items[0] if len(items) == 1 and "nic-1" not in names else None
        after = wait_until(without_nic1, 30, "nic-1 removed from the published pool")
        assert after["metadata"]["name"] == before["metadata"]["name"]
        assert after["spec"]["pool"]["generation"] == before["spec"]["pool"]["generation"]
    finally:
        _fault(gpu_node, "nic-1", "add")
    wait_until(lambda: "nic-1" in {d["name"] for s in gpu_node.pools_complete().get(
        gpu_node.name, []) for d in s["spec"].get("devices", [])}, 30, "nic-1 back")
    assert _errors(gpu_node) == {}
