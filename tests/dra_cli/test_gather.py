"""What `kubectl dra` keeps of each LIST page (gather._trimmed): what the commands read,
not the cluster."""

from __future__ import annotations

from simdra._driver.dra_cli.gather import _trimmed, pod_health


def _pod(name: str, **status: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": "u",
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {"nodeName": "n", "containers": [{"name": "a", "image": "i"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}], **status}}


def test_pods_are_kept_only_when_a_container_reports_device_health() -> None:
    health = [{"name": "claim:gpu", "resources": [{"resourceID": "r", "health": "Healthy"}]}]
    claims = [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]
    page = [_pod("quiet", containerStatuses=[{"name": "a", "ready": True}]),
            _pod("reporting", resourceClaimStatuses=claims, initContainerStatuses=[
                {"name": "i", "allocatedResourcesStatus": health}],
                containerStatuses=[{"name": "a", "allocatedResourcesStatus": health}])]
    assert _trimmed("pods", page) == [{
        "metadata": {"name": "reporting", "namespace": "ns"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
        "status": {"resourceClaimStatuses": claims, "containerStatuses": [
            {"allocatedResourcesStatus": health}, {"allocatedResourcesStatus": health}]}}]
    assert pod_health(_pod("bare")) is None


def test_other_kinds_lose_only_their_managed_fields() -> None:
    claim = {"metadata": {"name": "c", "managedFields": [{"manager": "x"}]},
             "status": {"reservedFor": [{"name": "p"}]}}
    assert _trimmed("claims", [claim]) == [
        {"metadata": {"name": "c"}, "status": {"reservedFor": [{"name": "p"}]}}]
