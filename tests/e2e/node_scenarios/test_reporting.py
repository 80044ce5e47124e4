"""What the plugin reports about prepared devices shows in the API: claim status.devices
(the claim-status overlay) and device health in the pod's status."""

from __future__ import annotations

from .. import realnode, releases
from ..realnode import (
    DATA_DIR,
    Kube,
    PluginDeployment,
    wait,
)


def test_node_claim_status_overlay_fills_devices(kube: Kube, plugin: PluginDeployment) -> None:
    """g. With deploy/overlays/fake-claim-status the claim's status.devices is written."""
    with plugin.using("fake-claim-status"):
        kube.template("gpu-g", "gpu.dra.example.com")
        kube.pod("status-pod", "gpu-g")
        pod = kube.wait_running("status-pod")
        name = kube.claim_of(pod)["metadata"]["name"]
        found: dict = {}

        def written() -> bool:
            claim = kube.claim_of(pod)
            found.update(claim)
            return bool(claim.get("status", {}).get("devices"))

        wait(
            f"claim {name} status.devices written by the plugin", written, 60, kube.node.kubelet_log
        )
        [result] = found["status"]["allocation"]["devices"]["results"]
        [dev] = found["status"]["devices"]
        assert (dev["driver"], dev["pool"], dev["device"]) == (
            result["driver"],
            result["pool"],
            result["device"],
        )
        assert {c["type"]: c["status"] for c in dev["conditions"]}.get("Ready") == "True"
        assert dev["data"]["cdiDeviceID"].startswith("k8s.dra.example.com/device=")
        kube.delete_all()


def test_node_fault_shows_in_pod_status(kube: Kube, plugin: PluginDeployment) -> None:
    """f. `simdra fault DEVICE unhealthy` in the plugin pod: the pod using the device
    shows it Unhealthy in status.containerStatuses[].allocatedResourcesStatus."""
    realnode.require_feature(kube.cp, "ResourceHealthStatus")
    templated = releases.health_names_generated_claims(kube.cp)
    if templated:
        kube.template("gpu-f", "gpu.dra.example.com")
        kube.pod("health-pod", "gpu-f")
    else:  # a claim named like the pod's entry: the one kind this release reports on
        kube.claim("gpu-f", [realnode.request("gpu", "gpu.dra.example.com")])
        kube.create_pod("health-pod", [realnode.container("app", [{"name": "gpu-f"}])],
                        [{"name": "gpu-f", "resourceClaimName": "gpu-f"}])
    pod = kube.wait_running("health-pod")
    claim = kube.claim_of(pod) if templated else kube.read_claim("gpu-f")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    device = result["device"]
    plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, device, "unhealthy")
    try:
        health: list = []

        def shown() -> bool:
            st = (kube.get_pod("health-pod") or {}).get("status", {})
            statuses = (st.get("containerStatuses") or [{}])[0].get(
                "allocatedResourcesStatus"
            ) or []
            health[:] = [r for s in statuses for r in s.get("resources") or []]
            return any(r.get("health") == "Unhealthy" for r in health)

        wait(
            f"pod health-pod shows {device} Unhealthy",
            shown,
            90,
            kube.node.kubelet_log,
            lambda: str(health),
        )
        [res] = [r for r in health if r.get("health") == "Unhealthy"]
        assert res["resourceID"].startswith("k8s.dra.example.com/device=")
        assert res["resourceID"].endswith(device)
    finally:
        plugin.exec("simdra", "fault", "--plugin-dir", DATA_DIR, "reset")
