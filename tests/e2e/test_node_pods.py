"""Real node: pods with claims run on the real kubelet and containerd, and their
containers see exactly their devices' CDI edits; deleting them unprepares.

Each pod prints its SIMDRA_ env at start (read back with the pod log API, through the
kubelet), which is what CDI injected when containerd created the container.
"""

from __future__ import annotations

from . import realnode
from .realnode import Kube, cdi_files, plugin_usage, unit_env, wait

# Fixtures (see realnode.py).
node_bin, node_images, real_node = realnode.node_bin, realnode.node_images, realnode.real_node
plugin, kube = realnode.plugin, realnode.kube


def _allocated(claim: dict) -> list[dict]:
    return claim["status"]["allocation"]["devices"]["results"]


def test_node_gpu_pod_sees_its_cdi_env(kube: Kube) -> None:
    """a. One GPU from a ResourceClaimTemplate: the container's env is that device's."""
    kube.template("one-gpu", "gpu.dra.example.com")
    kube.pod("gpu-pod", "one-gpu")
    pod = kube.wait_running("gpu-pod")
    claim = kube.claim_of(pod)
    [result] = _allocated(claim)
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
    kube.template("nic-2g", "nic.dra.example.com", capacity={"bandwidth": "2G"})
    kube.template("gpu-1", "gpu.dra.example.com")
    kube.pod("nic-pod", "nic-2g")
    kube.pod("gpu-pod-c", "gpu-1")
    pods = [kube.wait_running(n) for n in ("nic-pod", "gpu-pod-c")]
    claims = [kube.claim_of(p) for p in pods]
    files = {f"k8s.dra.example.com-device_{c['metadata']['uid']}.json" for c in claims}
    assert files <= cdi_files()
    nic = _allocated(claims[0])[0]
    assert nic["consumedCapacity"]["bandwidth"] == "2G"
    held = next(d for d in plugin_usage()["devices"] if d["device"] == nic["device"])
    assert [h["claim"]["uid"] for h in held["holders"]] == [claims[0]["metadata"]["uid"]]

    for n in ("nic-pod", "gpu-pod-c"):
        kube.delete_pod(n)
    wait("CDI spec files of the deleted pods' claims removed", lambda: not (files & cdi_files()),
         60, kube.node.kubelet_log, lambda: str(sorted(files & cdi_files())))
    for c in claims:
        wait(f"claim {c['metadata']['name']} deleted with its pod",
             lambda c=c: not any(x.metadata.uid == c["metadata"]["uid"]
                                 for x in kube.resource.list_namespaced_resource_claim(c["metadata"]["namespace"]).items),
             60, kube.node.kubelet_log)
    # Capacity is free again: the plugin's own ledger holds nothing for that NIC.
    nic_usage = next(d for d in plugin_usage()["devices"] if d["device"] == nic["device"])
    assert nic_usage["holders"] == [], nic_usage
    assert nic_usage["free"] == nic_usage["capacity"]
