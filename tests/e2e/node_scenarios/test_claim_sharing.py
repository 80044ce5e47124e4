"""Claims used by more than one pod or container on the real node: one ResourceClaim two
pods name, and one claim whose requests go to different containers of a pod."""

from __future__ import annotations

from .. import realnode
from ..realnode import (
    Kube,
    PluginDeployment,
    allocated,
    cdi_files,
    container,
    ledger_holders,
    request,
    spec_file,
    unit_env,
    wait,
)

GPU = "gpu.dra.example.com"
NIC = "nic.dra.example.com"


def test_node_claim_shared_by_two_pods(kube: Kube, plugin: PluginDeployment) -> None:
    """One ResourceClaim named by two pods (resourceClaimName): both run and see the same
    device and claim UID; the plugin prepares it once (one CDI spec file) and unprepares
    it only when the second pod is gone."""
    kube.claim("shared-gpu", [request("gpu", GPU)])
    names = ("share-1", "share-2")
    for name in names:
        kube.create_pod(
            name,
            [container("app", [{"name": "gpu"}])],
            [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
        )
    for name in names:
        kube.wait_running(name)
    claim = kube.read_claim("shared-gpu")
    uid = claim["metadata"]["uid"]
    [result] = allocated(claim)
    assert {r["name"] for r in claim["status"]["reservedFor"]} == set(names)
    seen = [unit_env(kube.env(n)) for n in names]
    assert all(len(units) == 1 for units in seen), f"expected one device each, got {seen}"
    assert seen[0] == seen[1], "the two pods see different CDI devices of one claim"
    [unit] = seen[0].values()
    assert (unit["NAME"], unit["CLAIM_UID"]) == (result["device"], uid)
    assert [f for f in cdi_files() if uid in f] == [spec_file(claim)]
    assert plugin.prepares_of(claim) == 1

    kube.delete_pod("share-1")
    assert spec_file(claim) in cdi_files(), "unprepared while share-2 still uses the claim"
    assert (kube.get_pod("share-2") or {}).get("status", {}).get("phase") == "Running"
    assert ledger_holders(result["device"]) == [uid]

    kube.delete_pod("share-2")
    wait(
        "claim shared-gpu unprepared after its last pod (CDI spec file and ledger entry gone)",
        lambda: spec_file(claim) not in cdi_files() and not ledger_holders(result["device"]),
        60,
        kube.node.kubelet_log,
    )


def test_node_per_container_requests(kube: Kube) -> None:
    """A claim with a GPU request and a NIC request, each given to one container of the
    pod (resources.claims[].request): each container sees only its request's device."""
    bandwidth = realnode.incidental_capacity(kube.cp, "1G")
    kube.claim("split", [request("gpu", GPU), request("nic", NIC, capacity=bandwidth)])
    kube.create_pod(
        "split-pod",
        [
            container("a", [{"name": "dev", "request": "gpu"}]),
            container("b", [{"name": "dev", "request": "nic"}]),
        ],
        [{"name": "dev", "resourceClaimName": "split"}],
    )
    kube.wait_running("split-pod")
    claim = kube.read_claim("split")
    results = {r["request"]: r["device"] for r in allocated(claim)}
    for name, req, kind in (("a", "gpu", "gpu"), ("b", "nic", "nic")):
        units = unit_env(kube.env("split-pod", container=name))
        assert len(units) == 1, f"container {name}: expected only request {req}, got {units}"
        [unit] = units.values()
        assert (unit["NAME"], unit["TYPE"], unit["REQUEST"]) == (results[req], kind, req)
        assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
