"""What `kubectl dra` keeps of each LIST page (gather._trimmed): what the commands read,
not the cluster."""

from __future__ import annotations

import json

from simdra._driver.dra_cli.gather import _list_metadata, _page, _trimmed, pod_health


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


def test_claims_lose_what_drivers_report_of_each_device() -> None:
    claim = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {}},
                                                   "devices": [{"device": "gpu-0"}]}}
    assert _trimmed("claims", [claim]) == [
        {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {}}}}]


def _body(items: list[dict[str, object]], token: str) -> bytes:
    # As the API server writes a list: its metadata before its items.
    return json.dumps({"kind": "PodList", "apiVersion": "v1",
                       "metadata": {"resourceVersion": "7", "continue": token},
                       "items": items}).encode()


def test_a_page_of_pods_none_reporting_health_is_not_decoded() -> None:
    quiet = _pod("quiet", containerStatuses=[{"name": "a", "ready": True}])
    assert _page("pods", _body([quiet], "next")) == ([], "next")
    assert _page("pods", _body([quiet], "")) == ([], "")
    health = [{"name": "claim:gpu", "resources": [{"resourceID": "r", "health": "Healthy"}]}]
    reporting = _pod("reporting", containerStatuses=[{"allocatedResourcesStatus": health}])
    items, token = _page("pods", _body([quiet, reporting], "more"))
    assert [i["metadata"]["name"] for i in items] == ["reporting"] and token == "more"


def test_a_list_whose_metadata_is_not_first_is_decoded_whole() -> None:
    body = json.dumps({"items": [], "metadata": {"continue": "t"}}).encode()
    assert _list_metadata(body) is None
    assert _page("pods", body) == ([], "t")
    assert _list_metadata(b'{"metadata": {"continue": "x"}, "items": []}') == {"continue": "x"}
