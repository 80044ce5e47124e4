"""Request shapes the scheduler resolves before the plugin prepares, on the real node:
a prioritized list (firstAvailable) falls back to its second subrequest, and a
distinctAttribute constraint spreads two shares over two NICs; each container sees
exactly the devices that were chosen."""

from __future__ import annotations

from .. import realnode
from ..realnode import JSON, Kube, allocated, exact_request, require_feature, slice_device, unit_env

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"


def subrequest(name: str, selector: str) -> JSON:
    """One GPU of a firstAvailable list (a DeviceSubRequest)."""
    return {"name": name, **exact_request(name, GPU, selector)["exactly"]}


def test_node_prioritized_list_falls_back(kube: Kube) -> None:
    """firstAvailable [a GPU model the node lacks, gpu-7]: the claim gets gpu-7 for
    subrequest dev/fallback, and the container's env says so."""
    require_feature(kube.cp, "DRAPrioritizedList")
    kube.claim_template(
        "gpu-fallback",
        [
            {
                "name": "dev",
                "firstAvailable": [
                    subrequest("preferred", 'device.attributes["dra.example.com"].model == "none"'),
                    subrequest("fallback", 'device.attributes["dra.example.com"].index == 7'),
                ],
            }
        ],
    )
    kube.pod("fallback-pod", "gpu-fallback")
    claim = kube.claim_of(kube.wait_running("fallback-pod"))
    [result] = allocated(claim)
    assert (result["request"], result["device"]) == ("dev/fallback", "gpu-7")
    units = unit_env(kube.env("fallback-pod"))
    assert len(units) == 1, f"expected the env of one device, got {sorted(units)}"
    [unit] = units.values()
    assert (unit["NAME"], unit["REQUEST"]) == ("gpu-7", "dev/fallback")
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]


def test_node_distinct_attribute_spreads_shares(kube: Kube) -> None:
    """Two 1G NIC requests with distinctAttribute interfaceName (alone both would fit
    one NIC) land on two NICs; the container sees both shares."""
    require_feature(kube.cp, "DRAConsumableCapacity")
    amount = realnode.incidental_capacity(kube.cp, "1G")
    kube.claim_template(
        "two-nics",
        [exact_request(n, NIC, capacity=amount and {"requests": amount}) for n in ("a", "b")],
        constraints=[
            {"requests": ["a", "b"], "distinctAttribute": "dra.example.com/interfaceName"}
        ],
    )
    kube.pod("spread-pod", "two-nics")
    claim = kube.claim_of(kube.wait_running("spread-pod"))
    results = {r["request"]: r for r in allocated(claim)}
    assert set(results) == {"a", "b"}, f"allocated: {sorted(results)}"
    names = {}
    for request, result in results.items():
        device = slice_device(kube.cp, kube.node.name, result["device"])
        assert device is not None, f"{result['device']} not in the node's slices"
        names[request] = device["attributes"]["interfaceName"]["string"]
    assert names["a"] != names["b"], f"both shares on interface {names['a']}"
    units = unit_env(kube.env("spread-pod"))
    seen = {u["REQUEST"]: (u["NAME"], u["INTERFACE_NAME"], u["SHARE_ID"]) for u in units.values()}
    assert seen == {r: (results[r]["device"], names[r], results[r]["shareID"]) for r in ("a", "b")}
