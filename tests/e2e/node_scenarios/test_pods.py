"""Pods with claims on the real node: each container sees exactly its devices' CDI edits
(every pod prints its SIMDRA_ env at start, read back through the kubelet's log API), and
deleting the pods unprepares their claims."""

from __future__ import annotations

from simdra._driver.core.quantity import parse_quantity

from .. import realnode, releases
from ..realnode import (
    Kube,
    allocated,
    cdi_files,
    node_slices,
    plugin_usage,
    unit_env,
    wait,
)


def test_node_gpu_pod_sees_its_cdi_env(kube: Kube) -> None:
    """a. One GPU from a ResourceClaimTemplate: the container's env is that device's."""
    kube.template("one-gpu", "gpu.dra.example.com")
    kube.pod("gpu-pod", "one-gpu")
    pod = kube.wait_running("gpu-pod")
    claim = kube.claim_of(pod)
    [result] = allocated(claim)
    units = unit_env(kube.env("gpu-pod"))
    assert len(units) == 1, f"expected the env of one device, got {sorted(units)}"
    [unit] = units.values()
    assert unit["NAME"] == result["device"]
    assert unit["TYPE"] == "gpu"
    assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
    assert unit["CLAIM"] == f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
    assert unit["CDI_DEVICE"].startswith("k8s.dra.example.com/device=")
    assert f"k8s.dra.example.com-device_{claim['metadata']['uid']}.json" in cdi_files()


def test_node_deleting_pods_unprepares(kube: Kube) -> None:
    """c. Deleting the pods: CDI spec files gone, claims deleted, NIC capacity free again."""
    releases.require_capacity_requests(kube.cp)
    kube.template("nic-2g", "nic.dra.example.com", capacity={"bandwidth": "2G"})
    kube.template("gpu-1", "gpu.dra.example.com")
    kube.pod("nic-pod", "nic-2g")
    kube.pod("gpu-pod-c", "gpu-1")
    pods = [kube.wait_running(n) for n in ("nic-pod", "gpu-pod-c")]
    claims = [kube.claim_of(p) for p in pods]
    files = {f"k8s.dra.example.com-device_{c['metadata']['uid']}.json" for c in claims}
    assert files <= cdi_files()
    nic = allocated(claims[0])[0]
    # The real scheduler writes the rounded amount in binary-SI form ("1953125Ki" for 2G):
    # compare values, not strings.
    assert parse_quantity(nic["consumedCapacity"]["bandwidth"]) == parse_quantity("2G")
    held = next(d for d in plugin_usage()["devices"] if d["device"] == nic["device"])
    assert [h["claim"]["uid"] for h in held["holders"]] == [claims[0]["metadata"]["uid"]]

    for n in ("nic-pod", "gpu-pod-c"):
        kube.delete_pod(n)
    wait(
        "CDI spec files of the deleted pods' claims removed",
        lambda: not (files & cdi_files()),
        60,
        kube.node.kubelet_log,
        lambda: str(sorted(files & cdi_files())),
    )
    for c in claims:
        wait(
            f"claim {c['metadata']['name']} deleted with its pod",
            lambda c=c: (
                not any(
                    x.metadata.uid == c["metadata"]["uid"]
                    for x in kube.resource.list_namespaced_resource_claim(
                        c["metadata"]["namespace"]
                    ).items
                )
            ),
            60,
            kube.node.kubelet_log,
        )
    # Capacity is free again: the plugin's ledger holds nothing for that NIC, and the
    # scheduler gives one claim all of its bandwidth.
    still_held = [
        d for d in plugin_usage()["devices"] if d["device"] == nic["device"] and d["holders"]
    ]
    assert still_held == []
    device = next(
        d
        for s in node_slices(kube.cp, kube.node.name)
        for d in s["spec"].get("devices") or []
        if d["name"] == nic["device"]
    )
    interface = device["attributes"]["interfaceName"]["string"]
    kube.template(
        "nic-all",
        "nic.dra.example.com",
        capacity={"bandwidth": device["capacity"]["bandwidth"]["value"]},
        selector=f'device.attributes["dra.example.com"].interfaceName == "{interface}"',
    )
    kube.pod("nic-all", "nic-all")
    [result] = allocated(kube.claim_of(kube.wait_running("nic-all")))
    assert result["device"] == nic["device"]


def test_node_two_pods_share_one_nic(kube: Kube) -> None:
    """b. Two pods take 1G each of the same NIC (the NIC's default share where the release
    cannot allocate a capacity request), run side by side, and each container sees only
    its own share."""
    selector = 'device.attributes["dra.example.com"].interfaceName == "sim3"'
    capacity = realnode.incidental_capacity(kube.cp, "1G")
    kube.template("nic3-1g", "nic.dra.example.com", capacity=capacity, selector=selector)
    kube.pod("share-a", "nic3-1g")
    kube.pod("share-b", "nic3-1g")
    pods = {n: kube.wait_running(n) for n in ("share-a", "share-b")}
    seen = {}
    for name, pod in pods.items():
        claim = kube.claim_of(pod)
        [result] = allocated(claim)
        units = unit_env(kube.env(name))
        assert len(units) == 1, f"{name}: expected one share's env, got {sorted(units)}"
        [unit] = units.values()
        assert unit["NAME"] == result["device"] == "nic-3"
        assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
        assert unit["SHARE_ID"] == result["shareID"]
        assert unit["CAPACITY_BANDWIDTH"] == result["consumedCapacity"]["bandwidth"]
        assert not capacity or unit["CAPACITY_BANDWIDTH"] == "1G"
        seen[name] = unit
    assert seen["share-a"]["SHARE_ID"] != seen["share-b"]["SHARE_ID"]
    assert seen["share-a"]["CDI_DEVICE"] != seen["share-b"]["CDI_DEVICE"]
