"""CPUs as devices that count against the node's allocatable CPU (KEP-5517, gate
DRANodeAllocatableResources) on the real node: the plugin publishes one shared device
per NUMA node (deploy/overlays/fake-cpu: two, of 32 CPUs each) whose `cpus` map onto the
node resource `cpu`. The real scheduler then counts a claim's CPUs like a container's CPU
request: a claim the device could hold but the node's allocatable cannot stays Pending
with the scheduler's "Insufficient cpu", a claim that fits runs and its container learns
its NUMA node and how many CPUs it got, and while it runs an ordinary pod that would fit
the node without the claim does not.

The node is this machine: its allocatable CPU is read, never assumed."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest

from simdra._driver.core.quantity import parse_quantity

from ..realnode import (
    DRIVER,
    JSON,
    NAMESPACE,
    Kube,
    PluginDeployment,
    allocated,
    container,
    exact_request,
    require_feature,
    unit_env,
)

pytestmark = pytest.mark.overlay("fake-cpu")

GATE = "DRANodeAllocatableResources"
CPU = "cpu.dra.example.com"
CPUS_PER_DEVICE = 32  # simdra/_driver/kinds/cpu.py SIMULATED_CPUS_PER_NUMA_NODE
INSUFFICIENT = "Insufficient cpu"


@pytest.fixture(scope="module")
def cpus(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet publishing CPU devices for this file's scenarios (the gate on)."""
    require_feature(plugin.cp, GATE)
    with plugin.using("fake-cpu"):
        node = plugin.node.name
        plugin.wait_devices(plugin.devices() | {(node, "cpu-0"), (node, "cpu-1")})
        yield


def _free_millicpu(kube: Kube) -> int:
    """The node's allocatable CPU less what its pods already request (milli-CPUs)."""
    node = kube.core.read_node(kube.node.name)
    allocatable = parse_quantity(node.status.allocatable["cpu"])
    pods = kube.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={kube.node.name}").items
    requested = sum(
        (parse_quantity((c.resources.requests or {}).get("cpu", "0"))
         for p in pods if p.status.phase not in ("Succeeded", "Failed")
         for c in p.spec.containers), start=parse_quantity("0"))
    return int((allocatable - requested) * 1000)


def _cpu_template(kube: Kube, name: str, count: int) -> None:
    kube.claim_template(name, [exact_request(
        "cpu", CPU, capacity={"requests": {"cpus": str(count)}})])


def _scheduler_message(kube: Kube, pod: str) -> str:
    status = (kube.get_pod(pod) or {}).get("status") or {}
    return " ".join(c.get("message", "") for c in status.get("conditions") or []
                    if c["type"] == "PodScheduled")


def _is_1_36(kube: Kube) -> bool:
    return kube.cp.version().lstrip("v").startswith("1.36.")


def test_node_published_cpu_devices_map_onto_node_cpu(kube: Kube, cpus: None) -> None:
    """The API server kept the mapping (the gate is on): each CPU device says its `cpus`
    count against the node resource `cpu`, one for one, in the field of the server's
    release (1.36 named it nodeAllocatableResourceMappings)."""
    # As the server stores them (kubectl): the Python client's models drop 1.36's field.
    listed = json.loads(kube.cp.kubectl(
        "get", "resourceslices", "-o", "json",
        f"--field-selector=spec.nodeName={kube.node.name}").stdout)["items"]
    devices = [d for s in listed for d in s["spec"].get("devices") or []
               if s["spec"]["driver"] == DRIVER and d["name"].startswith("cpu-")]
    assert sorted(d["name"] for d in devices) == ["cpu-0", "cpu-1"]
    for device in devices:
        if _is_1_36(kube):
            assert device["nodeAllocatableResourceMappings"] == {
                "cpu": {"capacityKey": "cpus", "allocationMultiplier": "1"}}, device
        else:
            assert device["nodeAllocatableResources"] == {
                "cpu": {"mapping": {"capacityKey": "cpus", "capacityMultiplier": "1"}}}, device


def _mapped(status: list[JSON] | None) -> dict[str, str]:
    """Resource -> amount the scheduler recorded for the pod's claim (1.37's `mapping`
    list, 1.36's `resources` map)."""
    [entry] = status or [{}]
    if "mapping" in entry:
        return {m["name"]: m["quantity"] for m in entry["mapping"]}
    return dict(entry.get("resources") or {})


def test_node_claim_beyond_allocatable_cpu_stays_pending(kube: Kube, cpus: None) -> None:
    """More CPUs than the node's whole allocatable, fewer than the device holds: the
    device could be allocated, the node cannot take it, so the scheduler says
    "Insufficient cpu" and the pod stays Pending."""
    want = math.floor(_free_millicpu(kube) / 1000) + 1
    if want > CPUS_PER_DEVICE:
        pytest.skip(f"the node has {want - 1} free CPUs, more than a simulated NUMA node")
    _cpu_template(kube, "too-many-cpus", want)
    kube.pod("too-many-cpus", "too-many-cpus")
    kube.wait_unschedulable("too-many-cpus")
    message = _scheduler_message(kube, "too-many-cpus")
    assert INSUFFICIENT in message, message


def test_node_claimed_cpus_count_against_allocatable(kube: Kube, cpus: None) -> None:
    """A claim for one CPU runs and its container sees its NUMA node and CPU count; the
    scheduler records the mapped `cpu` on the pod; while it runs, a pod requesting all
    but half a CPU of what was free before cannot be placed ("Insufficient cpu"), and
    it runs once the claim's pod is gone."""
    free = _free_millicpu(kube)
    if free < 1500:
        pytest.skip(f"the node has only {free}m CPU free; the scenario needs 1500m")
    _cpu_template(kube, "one-cpu", 1)
    kube.pod("one-cpu", "one-cpu")
    claim = kube.claim_of(kube.wait_running("one-cpu"))
    [result] = allocated(claim)
    assert result["consumedCapacity"] == {"cpus": "1"}, result
    [unit] = unit_env(kube.env("one-cpu")).values()
    numa_node = result["device"].removeprefix("cpu-")
    assert (unit["NAME"], unit["NUMA_NODE"], unit["CAPACITY_CPUS"]) == (
        result["device"], numa_node, "1"), unit
    assert unit["CPU_LIST"], unit
    raw = json.loads(kube.cp.kubectl("get", "pod", "-n", NAMESPACE, "one-cpu",
                                     "-o", "json").stdout)
    mapped = raw["status"].get("nodeAllocatableResourceClaimStatuses")
    assert _mapped(mapped) == {"cpu": "1"}, mapped

    kube.create_pod("plain-cpu", [container("app", limits={"cpu": f"{free - 500}m"})])
    kube.wait_unschedulable("plain-cpu")
    message = _scheduler_message(kube, "plain-cpu")
    assert INSUFFICIENT in message, message
    kube.delete_pod("one-cpu")
    kube.wait_running("plain-cpu")
