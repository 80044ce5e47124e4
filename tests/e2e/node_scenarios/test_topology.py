"""Kubernetes' standard topology attribute on the real node: the real scheduler aligns a
GPU and a NIC share on one NUMA node through `matchAttribute` on
`resource.kubernetes.io/numaNode` (the name every driver publishes, so the same claim
would align our GPU with another driver's NIC), refuses a claim that cannot be aligned,
and the container learns the node of each device."""

from __future__ import annotations

from .. import realnode
from ..realnode import Kube, allocated, exact_request, require_feature, slice_device, unit_env

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"
NUMA_NODE = "resource.kubernetes.io/numaNode"
ON_NODE_1 = 'device.attributes["resource.kubernetes.io"].numaNode == 1'


def _aligned_template(kube: Kube, name: str, nic_selector: str | None = None) -> None:
    """A GPU on NUMA node 1 and a NIC share that must sit on the GPU's node."""
    amount = realnode.incidental_capacity(kube.cp, "1G")
    kube.claim_template(
        name,
        [exact_request("gpu", GPU, ON_NODE_1),
         exact_request("nic", NIC, nic_selector, capacity=amount and {"requests": amount})],
        constraints=[{"requests": ["gpu", "nic"], "matchAttribute": NUMA_NODE}],
    )


def test_node_gpu_and_nic_share_a_standard_numa_node(kube: Kube) -> None:
    """The scheduler picks a NIC on the GPU's NUMA node (alone it would take nic-0, on
    node 0); the slices say so and the container's NUMA_NODE agrees for both."""
    require_feature(kube.cp, "DRAConsumableCapacity")
    _aligned_template(kube, "aligned")
    kube.pod("aligned-pod", "aligned")
    claim = kube.claim_of(kube.wait_running("aligned-pod"))
    results = {r["request"]: r["device"] for r in allocated(claim)}
    assert set(results) == {"gpu", "nic"}, f"allocated: {results}"
    nodes = {}
    for request, name in results.items():
        device = slice_device(kube.cp, kube.node.name, name)
        assert device is not None, f"{name} not in the node's slices"
        nodes[request] = device["attributes"][NUMA_NODE]["int"]
    assert nodes == {"gpu": 1, "nic": 1}, f"devices {results} on NUMA nodes {nodes}"
    units = unit_env(kube.env("aligned-pod"))
    assert {u["NAME"]: u["NUMA_NODE"] for u in units.values()} == {
        results["gpu"]: "1", results["nic"]: "1"}


def test_node_claim_that_cannot_be_aligned_stays_pending(kube: Kube) -> None:
    """A NIC restricted to NUMA node 0 next to a GPU on node 1: no allocation satisfies
    the constraint, so the real scheduler leaves the pod Unschedulable."""
    require_feature(kube.cp, "DRAConsumableCapacity")
    on_node_0 = 'device.attributes["resource.kubernetes.io"].numaNode == 0'
    _aligned_template(kube, "misaligned", on_node_0)
    kube.pod("misaligned-pod", "misaligned")
    kube.wait_unschedulable("misaligned-pod")
