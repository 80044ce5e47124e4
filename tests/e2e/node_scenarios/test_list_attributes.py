"""List-type attributes (KEP-5491, DRAListTypeAttributes) on the real node: with
`--list-attributes` the `nic-multi-numa` NICs publish the standard
resource.kubernetes.io/numaNode as a list (nic-<even> near nodes [0, 1], nic-<odd> near
[2, 3]), and the real scheduler aligns by intersection (`matchAttribute`: a GPU on node 1
takes a NIC whose list holds 1) and separates by disjoint lists (`distinctAttribute`);
the container learns every node of its NIC. Skipped, naming the gate, where a release
lacks it (1.34, 1.35). 1.36 publishes and validates lists, but its scheduler does not
hand DRAListTypeAttributes to the allocator (`AllocatorFeatures` in the dynamicresources
plugin, v1.36.3), so a list never matches there: the scenarios that need the scheduler
to compare lists skip on 1.36 saying so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .. import realnode
from ..realnode import (
    Kube,
    PluginDeployment,
    allocated,
    exact_request,
    require_feature,
    slice_device,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("fake spanning")

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"
NUMA_NODE = "resource.kubernetes.io/numaNode"
GPU_ON_NODE_1 = 'device.attributes["resource.kubernetes.io"].numaNode == 1'
SPANNING = {"containers": [{"name": "plugin", "env": [
    {"name": "DEVICE_PROFILE", "value": "gpu,nic-multi-numa"},
    {"name": "NUM_DEVICES", "value": "4"},
    {"name": "LIST_ATTRIBUTES", "value": "true"}]}]}


@pytest.fixture(scope="module")
def spanning(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet publishing NICs near two NUMA nodes, as lists."""
    require_feature(plugin.cp, "DRAListTypeAttributes")
    require_feature(plugin.cp, "DRAConsumableCapacity")  # the NICs are shared
    with plugin.using("fake", pod_patch=SPANNING):
        def published() -> bool:
            nic = slice_device(plugin.cp, plugin.node.name, "nic-1")
            return bool(nic) and nic["attributes"].get(NUMA_NODE) == {"ints": [2, 3]}

        wait("nic-1 published near NUMA nodes [2, 3]", published, 90,
             plugin.node.kubelet_log, plugin.describe)
        yield


def _require_list_matching(kube: Kube) -> None:
    if kube.cp.minor() < 37:
        pytest.skip(f"Kubernetes {kube.cp.version()}: its scheduler does not pass "
                    "DRAListTypeAttributes to the allocator (fixed in 1.37), so lists never match")


def test_node_spanning_nic_is_published_and_seen_as_a_list(spanning: None, kube: Kube):
    """The API server keeps the list, and a container given nic-1 reads both nodes."""
    assert _nodes(kube, "nic-1") == [2, 3]
    kube.claim_template("span-one", [
        _nic(kube, "nic", 'device.attributes["dra.example.com"].interfaceName == "sim1"')])
    kube.pod("span-one-pod", "span-one")
    kube.wait_running("span-one-pod")
    [unit] = unit_env(kube.env("span-one-pod")).values()
    assert (unit["NAME"], unit["NUMA_NODE"]) == ("nic-1", "2,3")


def _nic(kube: Kube, name: str, selector: str | None = None, count: int = 1) -> dict[str, Any]:
    amount = realnode.incidental_capacity(kube.cp, "1G")
    return exact_request(name, NIC, selector, count=count,
                         **({"capacity": {"requests": amount}} if amount else {}))


def _nodes(kube: Kube, device: str) -> list[int]:
    found = slice_device(kube.cp, kube.node.name, device)
    assert found is not None, f"{device} not in the node's slices"
    value = found["attributes"][NUMA_NODE]
    return list(value["ints"]) if "ints" in value else [value["int"]]


def test_node_list_numa_node_aligns_a_gpu_with_a_spanning_nic(spanning: None, kube: Kube):
    """matchAttribute over a scalar and a list: the NIC's nodes must hold the GPU's."""
    _require_list_matching(kube)
    kube.claim_template("span-aligned", [exact_request("gpu", GPU, GPU_ON_NODE_1),
                                         _nic(kube, "nic")],
                        constraints=[{"requests": ["gpu", "nic"], "matchAttribute": NUMA_NODE}])
    kube.pod("span-aligned-pod", "span-aligned")
    claim = kube.claim_of(kube.wait_running("span-aligned-pod"))
    devices = {r["request"]: r["device"] for r in allocated(claim)}
    assert _nodes(kube, devices["gpu"]) == [1]
    assert _nodes(kube, devices["nic"]) == [0, 1], f"allocated {devices}"
    units = {u["NAME"]: u["NUMA_NODE"] for u in unit_env(kube.env("span-aligned-pod")).values()}
    assert units == {devices["gpu"]: "1", devices["nic"]: "0,1"}


def test_node_nic_near_other_nodes_cannot_be_aligned(spanning: None, kube: Kube):
    """The GPU on node 1 next to nic-1 (near [2, 3]): the lists do not meet, so the
    scheduler leaves the pod Unschedulable."""
    _require_list_matching(kube)
    other_socket = 'device.attributes["dra.example.com"].interfaceName == "sim1"'
    kube.claim_template("span-apart", [exact_request("gpu", GPU, GPU_ON_NODE_1),
                                       _nic(kube, "nic", other_socket)],
                        constraints=[{"requests": ["gpu", "nic"], "matchAttribute": NUMA_NODE}])
    kube.pod("span-apart-pod", "span-apart")
    kube.wait_unschedulable("span-apart-pod")


def test_node_distinct_nics_have_disjoint_numa_lists(spanning: None, kube: Kube):
    """distinctAttribute over lists: two NICs whose node lists share nothing, so one of
    each socket."""
    _require_list_matching(kube)
    kube.claim_template("span-distinct", [_nic(kube, "nics", count=2)],
                        constraints=[{"requests": ["nics"], "distinctAttribute": NUMA_NODE}])
    kube.pod("span-distinct-pod", "span-distinct")
    claim = kube.claim_of(kube.wait_running("span-distinct-pod"))
    lists = sorted(_nodes(kube, r["device"]) for r in allocated(claim))
    assert lists == [[0, 1], [2, 3]], f"allocated {[r['device'] for r in allocated(claim)]}"


def test_node_three_pairwise_disjoint_nics_do_not_exist(spanning: None, kube: Kube):
    """Only two disjoint lists exist on the node: three distinct NICs stay Pending."""
    _require_list_matching(kube)
    kube.claim_template("span-three", [_nic(kube, "nics", count=3)],
                        constraints=[{"requests": ["nics"], "distinctAttribute": NUMA_NODE}])
    kube.pod("span-three-pod", "span-three")
    kube.wait_unschedulable("span-three-pod")


EXAMPLE = realnode.REPO / "deploy/examples/nic-numa-span.yaml"
INVENTORY_WITH_LISTS = {"containers": [{"name": "plugin", "env": [
    {"name": "LIST_ATTRIBUTES", "value": "true"}]}]}


def test_node_example_nic_numa_span_runs_with_lists(plugin: PluginDeployment, kube: Kube):
    """deploy/examples/nic-numa-span.yaml on fake-inventory with LIST_ATTRIBUTES=true:
    nic-span-0 is published near [0, 1], the pod runs and reads both nodes."""
    require_feature(plugin.cp, "DRAListTypeAttributes")
    require_feature(plugin.cp, "DRAConsumableCapacity")
    _require_list_matching(kube)
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = realnode.NAMESPACE
        if doc["kind"] == "Pod":
            [app] = doc["spec"]["containers"]
            app["image"], app["imagePullPolicy"] = realnode.BUSYBOX, "Never"
            doc["spec"] = realnode.on_real_node(doc["spec"])
    with plugin.using("fake-inventory", pod_patch=INVENTORY_WITH_LISTS):
        def published() -> bool:
            nic = slice_device(plugin.cp, plugin.node.name, "nic-span-0")
            return bool(nic) and nic["attributes"].get(NUMA_NODE) == {"ints": [0, 1]}

        wait("nic-span-0 published near NUMA nodes [0, 1]", published, 90,
             plugin.node.kubelet_log, plugin.describe)
        kube.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        claim = kube.claim_of(kube.wait_running("nic-numa-span"))
        devices = {r["request"]: r["device"] for r in allocated(claim)}
        assert devices["span"] == "nic-span-0", devices
        units = {u["NAME"]: u["NUMA_NODE"] for u in unit_env(kube.env("nic-numa-span")).values()}
        assert units["nic-span-0"] == "0,1", units
        kube.delete_all()  # the claim's NICs go before the plugin rolls back
