"""What the plugin reports about prepared devices shows in the API: claim status.devices
(the claim-status overlay) and device health in the pod's status."""

from __future__ import annotations

import pytest

from .. import realnode, releases
from ..realnode import (
    DATA_DIR,
    JSON,
    Kube,
    PluginDeployment,
    wait,
)

pytestmark = pytest.mark.overlay("fake-claim-status")


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


def _device_health(kube: Kube, pod: str) -> list[JSON]:
    """The resources of the pod's first container's allocatedResourcesStatus."""
    st = (kube.get_pod(pod) or {}).get("status", {})
    statuses = (st.get("containerStatuses") or [{}])[0].get("allocatedResourcesStatus") or []
    return [r for s in statuses for r in s.get("resources") or []]


def _wait_health(kube: Kube, pod: str, claim: JSON, device: str, health: str) -> JSON:
    """Wait until the pod's status shows the claim's `device` as `health`; its entry."""
    # The resourceID is the device's CDI ID in the claim's spec: <claim UID>-<device>.
    resource = f"k8s.dra.example.com/device={claim['metadata']['uid']}-{device}"
    seen: list[JSON] = []

    def shown() -> bool:
        seen[:] = _device_health(kube, pod)
        return any(r.get("health") == health and r["resourceID"] == resource for r in seen)

    wait(f"pod {pod} shows {device} {health}", shown, 90, kube.node.kubelet_log,
         lambda: str(seen))
    [res] = [r for r in seen if r["resourceID"] == resource]
    return res


def test_node_fault_shows_in_pod_status(kube: Kube, plugin: PluginDeployment) -> None:
    """f. The pod using a device shows it Healthy in
    status.containerStatuses[].allocatedResourcesStatus; `simdra fault DEVICE unhealthy`
    in the plugin pod turns it Unhealthy there (with the fault's message where the release
    shows messages), and `simdra fault DEVICE healthy` turns it Healthy again."""
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
    # Healthy before the fault, so that Healthy after it shows the repair, not a default.
    _wait_health(kube, "health-pod", claim, device, "Healthy")
    message = "e2e: ECC error count over threshold"
    fault = ("simdra", "fault", "--plugin-dir", DATA_DIR)
    plugin.exec(*fault, device, "unhealthy", "--message", message)
    try:
        sick = _wait_health(kube, "health-pod", claim, device, "Unhealthy")
        if kube.cp.features().get("ResourceHealthStatusMessage"):
            assert sick.get("message") == message, sick
        plugin.exec(*fault, device, "healthy")
        healed = _wait_health(kube, "health-pod", claim, device, "Healthy")
        assert healed.get("message") != message, healed
        assert (kube.get_pod("health-pod") or {})["status"]["phase"] == "Running"
    finally:
        plugin.exec(*fault, "reset")
